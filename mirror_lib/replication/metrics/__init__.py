"""What a run tells about itself: its events on the metrics topic, the flow status snapshots, and
the Prometheus endpoint.

Imports ``copy``, ``planning`` and the shared modules; never ``companions`` or ``migration``.
"""
