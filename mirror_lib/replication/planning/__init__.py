"""Planning a slice: what ends it early (plan changes, a stalled ``--once``) and how a
micro-batch's budget is shared between partitions.

Imports only the shared modules of ``replication``.
"""
