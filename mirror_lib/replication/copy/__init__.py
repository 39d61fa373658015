"""The copy path: a slot's source reader, its writers, their transactions and the delivery ledger.

Imports ``planning`` and the shared modules of ``replication`` (context, events, translation);
never ``metrics``, ``companions`` or ``migration``.
"""
