"""Restoring a broker's CommitLog from a bronze table, byte for byte, and checking a store against the table
(docs/restore.md)."""

from connector.restore.plan import FilePlan, RestorePlan, plan_restore
from connector.restore.spark_job import restore_commitlog_spark
from connector.restore.store import restore_commitlog
from connector.restore.verify import StoreDifference, verify_store

__all__ = ["FilePlan", "RestorePlan", "StoreDifference", "plan_restore", "restore_commitlog",
           "restore_commitlog_spark", "verify_store"]
