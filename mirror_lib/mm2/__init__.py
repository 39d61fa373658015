"""MM2's own formats and rules: wire formats, replication policy (topic naming), topic/group
filters.

Pure; imports :mod:`mirror_lib.errors` only.
"""
