"""Fixtures of the broker-stub integration tests (shared helpers live in tests/support)."""

from tests.support.fixtures import broker_factory, namesrv_factory  # noqa: F401 - re-exported pytest fixtures
