"""Where tables, checkpoints and status files live: local paths or S3-compatible object stores (docs/object_storage.md).
``locations`` names them, ``config`` holds the store's settings, ``store`` opens them with those settings."""
