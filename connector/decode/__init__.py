"""CommitLog byte range → ``pyarrow.RecordBatch``: the executor half of the source, one concern per module (schema,
the record-stream state machine, vectorised record location, columns, properties and bodies, and the hot loops
behind :mod:`.kernels`: the native kernel or NumPy, chosen once at import; ``HAREPLICA_PURE_PYTHON=1`` forces
NumPy). Where it sits: docs/architecture.md "The path of one body"; every module: "Every module".
"""
