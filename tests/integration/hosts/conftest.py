"""Fixtures shared with the connector's integration tests: the shared Spark session with format("hareplica")."""

from tests.integration.connector.conftest import hareplica_spark  # noqa: F401 - re-exported fixture
