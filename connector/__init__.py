"""hareplica's Spark connector: ``format("hareplica")``, ``format("hareplica-landing")`` and ``format("deltalake")``.

In a user's own Spark application (README "Install into your Spark")::

    import connector
    connector.register_data_sources(spark)
    spark.readStream.format("hareplica").option("brokers", "broker-a=host:10912").load()
"""

from __future__ import annotations


def register_data_sources(spark) -> None:
    """Register hareplica's three Python data sources on the SparkSession ``spark`` (idempotent): ``hareplica``
    (connector.source), ``hareplica-landing`` (connector.landing) and ``deltalake`` (connector.delta.sink)."""
    from connector.delta.sink import DeltaLakeDataSource
    from connector.landing import HAReplicaLandingDataSource
    from connector.source import HAReplicaDataSource

    spark.dataSource.register(HAReplicaDataSource)
    spark.dataSource.register(HAReplicaLandingDataSource)
    spark.dataSource.register(DeltaLakeDataSource)
