"""The tools that move consumers and flows: verify, cutover, failover, Spark-checkpoint
translation, and taking over from (or handing back to) MirrorMaker 2.

The top room of ``replication``: it may import every other room.
"""
