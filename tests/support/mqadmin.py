"""Run the real RocketMQ 4.9.8 ``mqadmin`` (``MQAdminStartup`` of the staged tools jar) from tests.

Each run is one small JVM with its own ``ROCKETMQ_HOME`` and ``user.home`` under the caller's folder
(:func:`tests.support.jvm_peers.write_rocketmq_home`: ``conf/logback_tools.xml`` sends the tools' logs to
``logs/tools.log``), so nothing is written outside the test's tmp dir. ``mqadmin`` itself prints its table to
stdout and, when a sub-command fails, the ``SubCommandException`` stack trace to stderr while still exiting 0
(``MQAdminStartup.main0`` catches it); :class:`MqadminRun` therefore reads a failure from stderr.

Output parsers for the commands the interop tests compare (docs/broker_stub.md "mqadmin"):
:func:`parse_table` (``#Header`` rows of clusterList, topicStatus, consumerProgress...), :func:`parse_colon_pairs`
(brokerStatus's ``key : value``), :func:`parse_equal_pairs` (getBrokerConfig's ``key = value``).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.jvm_peers import java_binary, rocketmq_classpath, write_rocketmq_home

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
#: a small heap and a quick start: every command is one short-lived JVM
JVM_FLAGS = ("-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dfile.encoding=UTF-8",
             "-Djava.net.preferIPv4Stack=true")
TIMEOUT_S = 90.0


class MqadminError(AssertionError):
    """mqadmin timed out, or (with ``check=True``) printed a sub-command failure; the message holds its output."""


@dataclass
class MqadminRun:
    """One finished ``mqadmin`` run: the arguments, exit code, stdout and stderr text."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def failed(self) -> bool:
        """True when the sub-command failed (MQAdminStartup prints the SubCommandException and exits 0)."""
        return self.returncode != 0 or "SubCommandException" in self.stderr

    @property
    def cause(self) -> str:
        """The innermost ``Caused by:`` line of the failure ("" when none), e.g. ``...MQClientException:
        CODE: 17  DESC: No topic route info ...``."""
        causes = [line for line in self.stderr.splitlines() if line.startswith("Caused by:")]
        return causes[-1] if causes else ""

    def describe(self) -> str:
        return (f"mqadmin {' '.join(self.args)}: exit {self.returncode}\n--- stdout ---\n{self.stdout[-3000:]}\n"
                f"--- stderr ---\n{self.stderr[-3000:]}")


def run_mqadmin(args: list[str], *, namesrv: str, workdir: Path, timeout_s: float = TIMEOUT_S,
                check: bool = True, credentials: tuple[str, str] | None = None) -> MqadminRun:
    """``mqadmin <args> -n <namesrv>`` with ``ROCKETMQ_HOME=<workdir>/rocketmq_home``.

    ``credentials`` ``(accessKey, secretKey)`` go to ``conf/tools.yml``, from which 4.9.8's mqadmin signs every
    request (``AclClientRPCHook``); without them it sends no ACL fields. Raises JvmPeersMissing (no jars or
    java), MqadminError on a timeout (the JVM is killed) or, with ``check``, when the sub-command failed.
    """
    workdir = Path(workdir)
    home = write_rocketmq_home(workdir / "rocketmq_home", workdir / "logs")
    if credentials is not None:
        (home / "conf" / "tools.yml").write_text(f"accessKey: {credentials[0]}\nsecretKey: {credentials[1]}\n",
                                                 encoding="utf-8")
    cmd = [java_binary(), *JVM_FLAGS, f"-Duser.home={workdir}", "-cp", rocketmq_classpath(), MQADMIN_MAIN,
           *args, "-n", namesrv]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout_s, cwd=workdir, stdin=subprocess.DEVNULL,
                              env={**os.environ, "ROCKETMQ_HOME": str(home)})
    except subprocess.TimeoutExpired as exc:
        raise MqadminError(f"mqadmin {' '.join(args)} did not finish within {timeout_s} s\n"
                           f"{(exc.stdout or b'').decode('utf-8', 'replace')[-2000:]}\n"
                           f"{(exc.stderr or b'').decode('utf-8', 'replace')[-2000:]}") from None
    run = MqadminRun(list(args), proc.returncode, proc.stdout.decode("utf-8", "replace"),
                     proc.stderr.decode("utf-8", "replace"))
    if check and run.failed:
        raise MqadminError(run.describe())
    return run


def parse_table(text: str) -> tuple[list[str], list[list[str]]]:
    """A ``#Col A  #Col B ...`` table: (column names without ``#``, rows of whitespace-split cells).

    Header names may hold one space (``#Broker Name``); columns are found at each ``#``. A row is split at
    whitespace into at most as many cells as there are columns (the last cell keeps its spaces, e.g. a
    ``#Last Updated`` time); an empty last value gives a shorter row. Lines before the header and blank lines
    are skipped; so are lines after the table's first blank line (consumerProgress's ``Consume TPS`` footer).
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#")), None)
    if start is None:
        return [], []
    header = lines[start]
    cols = [m.start() for m in re.finditer(r"#", header)]
    names = [header[a:b].strip().lstrip("#") for a, b in zip(cols, cols[1:] + [len(header)], strict=True)]
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(line.rstrip().split(None, len(names) - 1))
    return names, rows


def parse_colon_pairs(text: str) -> dict[str, str]:
    """brokerStatus's ``key<padding>: value`` lines as a dict (the first `` : `` or ``: `` splits)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_equal_pairs(text: str) -> dict[str, str]:
    """getBrokerConfig's ``key<padding>=  value`` lines as a dict (``====addr====`` banners skipped)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("="):
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


__all__ = ["MQADMIN_MAIN", "MqadminError", "MqadminRun", "parse_colon_pairs", "parse_equal_pairs",
           "parse_table", "run_mqadmin"]
