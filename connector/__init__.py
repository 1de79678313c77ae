"""hareplica's Spark connector: ``format("hareplica")``, ``format("hareplica-landing")`` and ``format("deltalake")``.

In a user's own Spark application (README "Install into your Spark")::

    import connector
    connector.register_data_sources(spark)
    spark.readStream.format("hareplica").option("brokers", "broker-a=host:10912").load()
"""

from __future__ import annotations


def register_data_sources(spark) -> None:
    """Register hareplica's three Python data sources on the SparkSession ``spark`` (idempotent): ``hareplica``
    (connector.source), ``hareplica-landing`` (connector.landing) and ``deltalake`` (connector.delta.sink).

    A source the session holds already under its name is not registered again (Spark would log a warning that
    it replaced one); over Spark Connect, where this process cannot ask, each is registered."""
    from connector.delta.sink import DeltaLakeDataSource
    from connector.landing import HAReplicaLandingDataSource
    from connector.source import HAReplicaDataSource

    session = getattr(spark, "_jsparkSession", None)  # None over Spark Connect
    manager = session.sessionState().dataSourceManager() if session is not None else None
    for source in (HAReplicaDataSource, HAReplicaLandingDataSource, DeltaLakeDataSource):
        if manager is None or not manager.dataSourceExists(source.name()):
            spark.dataSource.register(source)
