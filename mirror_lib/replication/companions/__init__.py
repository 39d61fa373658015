"""What runs beside the copy on the driver: topic, config and ACL sync, write protection,
checkpoints, heartbeats, the companion threads and the supervision that keeps a run going.

Imports ``metrics``, ``copy``, ``planning`` and the shared modules; never ``migration``.
"""
