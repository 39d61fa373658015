"""The replication benchmark as a small package (entry point: ``bench/replication.py``).

Importing it puts the ``mirror_lib`` to benchmark first on ``sys.path`` (see ``bench.engine``),
so that every ``mirror_lib`` import of the benchmark resolves to that engine.
"""

from bench.engine import use_engine

use_engine()
