"""Offset rules without I/O: segments and exact translation, checkpoint rules, record comparison.

Pure; imports ``errors``, ``mm2`` and ``config``.
"""
