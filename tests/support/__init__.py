"""Reusable test helpers: real broker-stub processes and clients (tests/support/brokers.py)."""
