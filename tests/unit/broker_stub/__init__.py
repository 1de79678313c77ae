"""Unit tests of the broker stub (pure: no processes, no sockets)."""
