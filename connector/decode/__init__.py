"""CommitLog byte range → ``pyarrow.RecordBatch``: the executor half of the source.

Where it sits in the whole: docs/architecture.md "The path of one body".

One concern per module:

- :mod:`.schema`: the source's Arrow and Spark schema (MessageExt's column names).
- :mod:`.stream`: :class:`~connector.decode.stream.CommitLogArrowDecoder`, the record-stream state
  machine (chunks that split records, END_FILE blanks, batch limits, ranges that end inside a record).
- :mod:`.locate`: every record's fixed fields and the positions of its variable-length ones, vectorised,
  from the layout table of :mod:`connector.protocol.commitlog.layout`.
- :mod:`.columns`: the Arrow columns of a batch of located records.
- :mod:`.properties`, :mod:`.bodies`: the properties map and the body / ``decodeError`` columns.
- :mod:`.kernels`: the hot loops behind one interface, the native kernel (``connector/_decode_kernel.c``,
  :mod:`.native_kernels`) or NumPy (:mod:`.numpy_kernels`), chosen once at import
  (``HAREPLICA_PURE_PYTHON=1`` forces NumPy).
"""
