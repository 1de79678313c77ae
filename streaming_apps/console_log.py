"""Where the ``hareplica`` command's log records and Spark's output go: the console, or the command's log file.

At the default log level the console holds hareplica's own lines (what the command prints and log records at
``--log-level``, default WARNING); py4j's Python log records and the driver JVM's output (Spark's log4j lines,
the JVM's own notices) go to ``WORKDIR/logs/NAME.log``, which the command names once when it starts Spark.
``--verbose`` (or ``--log-level DEBUG``) keeps them all on the console instead. docs/cli.md ("The console and
the log file") describes both.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

#: The Python loggers of the py4j bridge between this process and the driver JVM.
PY4J_LOGGER = "py4j"
#: The folder under a command's workdir that holds its log file.
LOG_DIR = "logs"
#: The layout of a log record, on the console and in the log file.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
#: The level of py4j's records in the log file unless --verbose: its INFO records are several lines per
#: micro-batch (each callback's connection), its warnings are worth keeping.
PY4J_FILE_LEVEL = logging.WARNING


class ConsoleLog:
    """The command's logging: a console handler on stderr at ``level``, and later the log file.

    Args:
        level: the console's level of log records (a ``logging`` level name: DEBUG, INFO, WARNING, ERROR).
        verbose: py4j's records and the driver JVM's output stay on the console (no log file is opened);
            implied by ``level`` DEBUG.
    """

    def __init__(self, level: str, *, verbose: bool = False):
        self.level = logging.getLevelName(level.upper())
        if not isinstance(self.level, int):
            raise ValueError(f"--log-level {level!r}: must be DEBUG, INFO, WARNING or ERROR")
        self.verbose = verbose or self.level <= logging.DEBUG
        self.path: Path | None = None
        self._file_handler: logging.Handler | None = None

    def install(self) -> None:
        """Route the records: the root logger to stderr at the console level; py4j's nowhere until
        :meth:`open_file` (unless verbose: to the console as every other logger's)."""
        root = logging.getLogger()
        console = logging.StreamHandler(sys.stderr)
        console.setLevel(self.level)
        console.setFormatter(logging.Formatter(LOG_FORMAT))
        root.handlers[:] = [console]
        root.setLevel(self.level)
        py4j = logging.getLogger(PY4J_LOGGER)
        if self.verbose:  # never DEBUG: py4j's DEBUG records echo every bridge command with its arguments, the
            py4j.propagate = True  # Spark conf among them, secrets too (spark.hadoop.fs.s3a.secret.key)
            py4j.setLevel(max(self.level, logging.INFO))
        else:  # not the console: its records (and the stacks of a closing connection) belong in the file
            py4j.propagate = False
            py4j.handlers[:] = [logging.NullHandler()]

    def open_file(self, workdir: str | Path, name: str) -> Path | None:
        """Start the log file ``workdir/logs/NAME.log`` (appended to) for this command's records at INFO and
        up, and py4j's at :data:`PY4J_FILE_LEVEL`; returns its path, or None when verbose (the console keeps
        everything). The caller names it on the console and hands it to
        :func:`streaming_apps.spark_session.build_spark_session` (``log_file``) for the JVM's output.

        Raises:
            OSError: the folder or the file cannot be created.
        """
        if self.verbose:
            return None
        if self.path is not None:
            return self.path
        path = Path(workdir).resolve() / LOG_DIR / f"{name}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.setLevel(min(self.level, logging.INFO))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(min(self.level, logging.INFO))
        for console in (h for h in root.handlers if h is not handler):
            console.setLevel(self.level)
        py4j = logging.getLogger(PY4J_LOGGER)
        py4j.handlers[:] = [handler]
        py4j.setLevel(PY4J_FILE_LEVEL)
        self.path, self._file_handler = path, handler
        log.info("this log file holds the records of hareplica, py4j and the driver JVM's output")
        return path


#: The command's :class:`ConsoleLog` (set by :func:`install`), for the sub-commands that start Spark.
_current: ConsoleLog | None = None


def install(level: str, *, verbose: bool = False) -> ConsoleLog:
    """Create and install the command's :class:`ConsoleLog` (see there; ``ValueError`` for a bad level)."""
    global _current
    _current = ConsoleLog(level, verbose=verbose)
    _current.install()
    return _current


def open_log_file(workdir: str | Path, name: str) -> Path | None:
    """:meth:`ConsoleLog.open_file` of the installed one; None when none was installed (a library caller:
    its own logging rules) or when verbose."""
    return None if _current is None else _current.open_file(workdir, name)


#: the width a rich Console lays text and tables out in when it does not write to a terminal: lines are not wrapped
NON_TERMINAL_WIDTH = 10_000


def console(*, stderr: bool = False):
    """A rich Console for the command's own output (stdout, or ``stderr``): text is never wrapped by rich (a long
    line stays one line, ``soft_wrap``), and where the stream is not a terminal (a pipe, a file) tables are laid
    out in :data:`NON_TERMINAL_WIDTH` columns instead of rich's default of 80, so piped output is never cut."""
    from rich.console import Console

    out = Console(stderr=stderr, soft_wrap=True)
    if not out.is_terminal:
        out.width = NON_TERMINAL_WIDTH
    return out
