"""What users call: the ``mirror`` CLI, bundle job tasks, notebook helpers (widgets, configure),
status, MLflow tracking, dashboards, the demo.

Top layer: may import every layer.
"""
