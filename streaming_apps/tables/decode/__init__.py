"""The task-side body decoders of the typed tables: one C-backed library per body format (fastavro, protobuf's upb
runtime, msgspec), each turning a column of RocketMQ message bodies into typed Arrow columns and a one-line error
per row that does not decode. Start at :func:`streaming_apps.tables.decode.base.decoder_for`."""
