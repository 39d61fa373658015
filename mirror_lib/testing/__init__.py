"""Test support shipped with the package: embedded brokers, the recording admin fake, MM2's
reference models. Imported by tests, bench and the demo only, never by the library.
"""
