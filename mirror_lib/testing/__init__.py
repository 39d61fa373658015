"""Embedded brokers and Kafka produce/consume helpers, shipped with the package because the demo
uses them. Imported by tests, bench and the demo only, never by the library. Test-only fakes and
MM2's reference models live in ``tests/helpers``.
"""
