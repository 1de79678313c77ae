"""Integration tests of the broker stub: real processes on loopback ports, real files."""
