"""The driver's side of a micro-batch: one Delta commit carrying ``txn(appId, batchId)``, or a skipped replay.

:class:`DeltaBatchCommitter` is the one committer of the sink (``format("deltalake")``), ``write_batch`` and the
direct landing: :meth:`DeltaBatchCommitter.commit` adds a batch's files in one delta-rs transaction (empty
batches too), :meth:`DeltaBatchCommitter.abort` removes a failed batch's files. Files are deleted only through
:func:`connector.delta.files.delete_unreferenced_files`. Crash points, the replay rule
(:func:`batch_already_committed`) and which files are removed: docs/delta.md "2. The sink", "Exactly once" and
"The replay rule".
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from connector.delta import snapshots
from connector.delta.deltalog import logged_file_names
from connector.delta.faults import fault_point
from connector.delta.features import check_writable
from connector.delta.file_names import batch_file_prefix
from connector.delta.files import delete_unreferenced_files, list_batch_files
from connector.delta.location import check_new_table_location, open_delta_table
from connector.delta.messages import DeltaLakeCommitMessage, files_of, messages_of_rows
from connector.delta.no_space import no_space_text
from connector.delta.options import DeltaSinkOptions
from connector.delta.schema import check_partition_columns, check_schema_matches, delta_schema_of
from connector.errors import DeltaCommitError, DeltaSchemaMismatchError
from connector.retry import retry_attempts
from connector.storage import locations, store

log = logging.getLogger(__name__)

#: Commit attempts when another writer wins the optimistic-concurrency race (delta-rs retries appends itself).
MAX_COMMIT_ATTEMPTS = 10


class _LostCommitRace(Exception):
    """Another writer committed (or created the table) first; ``__cause__`` is delta-rs's error. Retried."""


def batch_already_committed(txn_version: int | None, batch_id: int) -> bool:
    """The replay rule: True when a table whose txn version for the writer's appId is ``txn_version`` already
    holds micro-batch ``batch_id``, so the batch must not be written again.

    docs/delta.md "2. The sink", "The replay rule": every commit of batch N records ``txn(appId,
    version=N)`` and batches commit in order, so a version ``>= batch_id`` means the batch is in the table.
    Every writer of this project asks this one function: the committer's commit and abort, ``write_batch``
    (connector.delta.foreach_batch) and ``merge_batch`` (connector.delta.merge).

    Args:
        txn_version: ``DeltaTable.transaction_version(appId)``; None when the table has no txn for the
            appId (or there is no table yet).
        batch_id: the micro-batch id (>= 0).
    """
    return txn_version is not None and txn_version >= batch_id


# --- before the first task: the target table --------------------------------------------------------
def open_target_table(opts: DeltaSinkOptions, schema: StructType):
    """The existing table at ``opts.table_uri`` checked for an append of ``schema`` rows, or None.

    None means no table yet: the location is then checked to be usable for a new one.

    Raises:
        UnsupportedTableFeatureError: the table has a writer feature this project cannot honour.
        DeltaSchemaMismatchError: the table's columns, or its partitioning when ``opts.partition_by`` is
            given, differ from the stream's.
        DeltaTablePathError: an unreadable ``_delta_log``, a file, or a non-empty plain folder.
    """
    table = open_delta_table(opts.table_uri)
    if table is not None:
        check_writable(table, opts.table_uri, "append")
        check_schema_matches(opts.table_uri, table.schema().to_json(), table.metadata().partition_columns,
                             schema, opts.partition_by)
    else:
        check_new_table_location(opts.table_uri, create_in_non_empty_path=opts.create_in_non_empty_path)
    return table


def target_partition_by(opts: DeltaSinkOptions, schema: StructType, table) -> tuple[str, ...]:
    """Partition columns of the append: the existing ``table``'s, else ``opts.partition_by`` or none; checked.

    Raises:
        DeltaSinkConfigError: bad partition columns, or a type of ``schema`` Delta cannot hold.
    """
    partition_by = tuple(table.metadata().partition_columns) if table is not None else (opts.partition_by or ())
    check_partition_columns(opts.table_uri, schema, partition_by)
    delta_schema_of(schema)
    return partition_by


# --- after the tasks: the commit ----------------------------------------------------------------------
@dataclass(frozen=True)
class DeltaBatchCommitter:
    """Commits or aborts the micro-batches of one writer (module docstring). Picklable; holds no table.

    Attributes:
        options: the writer's options (table, appId...).
        schema: the rows' Spark schema (the table's schema when it creates the table).
        partition_by: partition columns (:func:`target_partition_by`).
    """

    options: DeltaSinkOptions
    schema: StructType
    partition_by: tuple[str, ...]

    def commit(self, messages: Iterable[WriterCommitMessage | None], batch_id: int) -> None:
        """Commit the batch's files with ``txn(appId, batch_id)`` in one Delta transaction, or skip a replay.

        A replay (table txn version for appId >= batch_id) commits nothing and deletes the files the
        replay wrote. After a fresh commit, files left by earlier attempts of the batch are deleted.

        Raises:
            DeltaSchemaMismatchError: the table's schema changed under the stream (the batch's files are removed).
            DeltaCommitError: no commit after MAX_COMMIT_ATTEMPTS concurrent-commit conflicts.
        """

        uri, app_id = self.options.table_uri, self.options.app_id
        files = files_of(messages)
        paths = [f.path for f in files]
        actions = [f.to_add_action() for f in files]
        rows = sum(f.num_records for f in files)
        fault_point("before-delta-commit", batch_id, uri)
        try:
            for attempt in retry_attempts(MAX_COMMIT_ATTEMPTS, _LostCommitRace):
                with attempt:
                    table = snapshots.current_table(uri, app_id)
                    if table is None:
                        self._create_table(actions, batch_id)
                        log.info("created Delta table %s with batch %d of appId %s: %d files, %d rows", uri,
                                 batch_id, app_id, len(files), rows)
                    elif not self._append(table, actions, rows, batch_id, paths,
                                          attempt.retry_state.attempt_number):
                        return  # a replay: skipped
        except _LostCommitRace as e:
            snapshots.forget(uri, app_id)
            self._give_up(batch_id, paths, e.__cause__)
        except BaseException:
            snapshots.forget(uri, app_id)
            raise
        fault_point("after-delta-commit", batch_id, uri)
        self._remove_earlier_attempts(batch_id, paths)

    def _append(self, table, actions: list, rows: int, batch_id: int, paths: Sequence[str], attempt: int) -> bool:
        """Append the batch's files to ``table`` with the txn; False when the table already holds the batch
        (a replay: this attempt's files are removed, nothing is committed).

        Raises:
            DeltaSchemaMismatchError: the table's schema changed under the stream (the batch's files are removed).
            _LostCommitRace: another writer committed first (delta-rs's CommitFailedError).
            DeltaCommitError: the file system is full.
        """
        from deltalake.exceptions import CommitFailedError

        uri, app_id = self.options.table_uri, self.options.app_id
        try:
            check_schema_matches(uri, table.schema().to_json(), table.metadata().partition_columns,
                                 self.schema, self.partition_by)
        except DeltaSchemaMismatchError:
            delete_unreferenced_files(uri, paths, table)
            raise
        committed = snapshots.txn_version(uri, app_id, table)
        if batch_already_committed(committed, batch_id):
            self._skip_replay(table, committed, batch_id, paths, attempt)
            return False
        try:
            table.create_write_transaction(actions, mode="append", schema=delta_schema_of(self.schema),
                                           partition_by=list(self.partition_by) or None,
                                           commit_properties=self._commit_properties(batch_id),
                                           post_commithook_properties=_post_commit_hooks())
        except CommitFailedError as e:
            log.info("commit of batch %d of appId %s to %s conflicted (attempt %d): %s", batch_id, app_id, uri,
                     attempt, e)
            raise _LostCommitRace() from e
        except Exception as e:  # delta-rs reports a full disk as a plain error with the OS text
            self._raise_if_no_space(e, batch_id)
            raise
        log.info("committed batch %d of appId %s to %s: %d files, %d rows", batch_id, app_id, uri, len(actions),
                 rows)
        return True

    def abort(self, messages: Iterable[WriterCommitMessage | None], batch_id: int) -> None:
        """Remove the files of a failed batch, never a file the table references.

        Removed: the files in ``messages`` and, unless the batch's txn is already committed, every other
        file named for this appId and batch (tasks whose results Spark dropped when it cancelled them).
        Failed tasks (None messages) already removed their own files.
        """
        uri, app_id = self.options.table_uri, self.options.app_id
        candidates = {f.path for f in files_of(messages)}
        table = open_delta_table(uri)
        committed = table.transaction_version(app_id) if table is not None else None
        if not batch_already_committed(committed, batch_id):
            candidates.update(list_batch_files(uri, batch_file_prefix(app_id, batch_id)))
        deleted = delete_unreferenced_files(uri, sorted(candidates), table)
        # a batch that failed before any task wrote (e.g. while Spark planned the read): nothing to warn about,
        # the error itself is what the caller reports
        log.log(logging.WARNING if candidates else logging.INFO,
                "aborted batch %d of appId %s on %s (txn version %s): removed %d of %d candidate files",
                batch_id, app_id, uri, committed, len(deleted), len(candidates))

    def _commit_properties(self, batch_id: int):
        from deltalake.transaction import CommitProperties, Transaction

        return CommitProperties(
            app_transactions=[Transaction(self.options.app_id, batch_id)],
            custom_metadata={"hareplica.appId": self.options.app_id, "hareplica.batchId": batch_id},
        )

    def _create_table(self, actions: list, batch_id: int) -> None:
        """Create the table with the batch's files.

        Raises:
            _LostCommitRace: another writer created the table first (the commit is tried again as an append).
            DeltaCommitError: the creation failed and there is still no table.
        """
        from deltalake.exceptions import DeltaError
        from deltalake.transaction import create_table_with_add_actions

        uri = self.options.table_uri
        try:
            create_table_with_add_actions(uri, delta_schema_of(self.schema), actions, mode="error",
                                          partition_by=list(self.partition_by) or None,
                                          storage_options=store.storage_options(uri),
                                          commit_properties=self._commit_properties(batch_id))
        except DeltaError as e:
            self._raise_if_no_space(e, batch_id)
            if open_delta_table(uri) is None:
                raise DeltaCommitError(f"could not create Delta table {uri} with batch {batch_id} of appId "
                                       f"{self.options.app_id}: {e}") from e
            log.info("Delta table %s was created concurrently; retrying batch %d as an append", uri, batch_id)
            raise _LostCommitRace() from e

    def _raise_if_no_space(self, error: Exception, batch_id: int) -> None:
        """Raise DeltaCommitError naming the full disk when ``error`` says the table's file system is full."""
        full = no_space_text(error)
        if full:
            raise DeltaCommitError(
                f"could not commit batch {batch_id} of appId {self.options.app_id} to Delta table "
                f"{self.options.table_uri}: {full}: the file system is full; free space there and rerun: the batch "
                "was not committed and lands again, once") from error

    def _skip_replay(self, table, committed: int, batch_id: int, paths: Sequence[str], attempt: int) -> None:
        """The table already holds ``batch_id`` (txn version ``committed``): remove this attempt's files."""
        uri, app_id = self.options.table_uri, self.options.app_id
        deleted = delete_unreferenced_files(uri, paths, table)
        if attempt == 1 and committed == batch_id:
            deleted += self._remove_unlogged_batch_files(batch_id, table)
        if attempt == 1:
            log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): replay "
                        "skipped, %d fresh files removed", batch_id, app_id, uri, committed, len(deleted))
        else:
            log.info("batch %d of appId %s was committed to %s concurrently (txn version %d); %d files "
                     "of this attempt removed", batch_id, app_id, uri, committed, len(deleted))

    def _give_up(self, batch_id: int, paths: Sequence[str], last_error: BaseException | None) -> NoReturn:
        """Remove the batch's files after MAX_COMMIT_ATTEMPTS failed commits, then raise DeltaCommitError."""
        uri = self.options.table_uri
        try:
            delete_unreferenced_files(uri, paths)
        except Exception as e:  # noqa: BLE001 - the commit error below is what matters
            log.warning("could not clean up the files of batch %d in %s: %s", batch_id, uri, e)
        raise DeltaCommitError(f"could not commit batch {batch_id} of appId {self.options.app_id} to Delta table "
                               f"{uri} after {MAX_COMMIT_ATTEMPTS} attempts: {last_error}") from last_error

    def _remove_earlier_attempts(self, batch_id: int, paths: Sequence[str]) -> None:
        """After a fresh commit of ``batch_id``: delete files of earlier attempts of the same batch.

        They come from task attempts whose results Spark dropped and from runs that died before this
        batch's commit. Only the folders this batch wrote to are listed (cheap on a disk; in an object store not
        done, so that a micro-batch's requests do not grow with the table: orphan removal finds them); no version
        of the table
        can reference such a file, since the txn version was below ``batch_id`` until this commit, and
        the deletion still checks the current snapshot. Best effort: errors are logged.
        """
        folders = {posixpath.dirname(p) for p in paths}
        if not folders:
            return
        uri = self.options.table_uri
        if locations.is_uri(uri):  # a partition "folder" is a prefix of every file of the day: a listing per batch
            return  # would grow with the table; maintenance's orphan removal finds them (docs/object_storage.md)
        try:
            keep = set(paths)
            stale = [p for p in list_batch_files(uri, batch_file_prefix(self.options.app_id, batch_id), folders)
                     if p not in keep]
            if stale:
                deleted = delete_unreferenced_files(uri, stale)
                log.info("removed %d files of earlier attempts of batch %d of appId %s from %s", len(deleted),
                         batch_id, self.options.app_id, uri)
        except Exception as e:  # noqa: BLE001 - the batch is committed; leftovers are maintenance's job
            log.warning("could not list earlier attempts of batch %d in %s: %s", batch_id, uri, e)

    def _remove_unlogged_batch_files(self, batch_id: int, table) -> list[str]:
        """On a replay of the last committed batch: delete files of ``batch_id`` that no log entry names.

        They are left by attempts of the batch that died before its commit when the process then also
        died after the commit and before removing them (``_remove_earlier_attempts``). A file some
        ``add`` or ``remove`` action names is kept (time travel). Best effort: errors are logged.
        """
        uri = self.options.table_uri
        try:
            candidates = list_batch_files(uri, batch_file_prefix(self.options.app_id, batch_id))
            if not candidates:
                return []
            logged = logged_file_names(uri)
            stale = [p for p in candidates if posixpath.basename(p) not in logged]
            deleted = delete_unreferenced_files(uri, stale, table)
            if deleted:
                log.info("removed %d files of failed attempts of replayed batch %d of appId %s from %s",
                         len(deleted), batch_id, self.options.app_id, uri)
            return deleted
        except Exception as e:  # noqa: BLE001 - the batch is committed; leftovers are maintenance's job
            log.warning("could not look for failed attempts of batch %d in %s: %s", batch_id, uri, e)
            return []


def _post_commit_hooks():
    """What delta-rs does after each of the writers' commits: its checkpoint every ``delta.checkpointInterval``
    commits, but not its clean-up of expired log files, which lists the whole ``_delta_log`` (one LIST per 1,000
    objects in a store) on every commit; maintenance removes them (``cleanup_metadata``, docs/delta.md "3.
    Maintenance")."""
    from deltalake.transaction import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)


def commit_task_messages(committer: DeltaBatchCommitter, collect: Callable[[], Iterable],
                         batch_id: int) -> list[DeltaLakeCommitMessage]:
    """Run a batch's tasks and commit what they wrote: the driver's part of ``write_batch`` and the direct landing.

    ``collect()`` runs the Spark job whose tasks write the files and returns its rows, each holding one
    task's pickled message (connector.delta.messages). A failed job aborts the batch (its files are
    removed unless the table already holds it) and the error propagates; otherwise the messages are
    committed with :meth:`DeltaBatchCommitter.commit` and returned.
    """
    try:
        rows = collect()
    except BaseException:
        committer.abort([], batch_id)
        raise
    messages = messages_of_rows(rows)
    committer.commit(messages, batch_id)
    return messages
