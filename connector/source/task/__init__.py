"""The task side of ``format("hareplica")``: what runs in a Spark task's Python worker.

Fetching one InputPartition over HA, decoding it into Arrow and applying the query's ``batch_transform``
(docs/source.md "Rows", "Speed and memory").
"""
