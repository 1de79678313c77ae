"""``broker_stub status ADDR`` and ``broker_stub delete-expired ADDR``: operator commands over remoting. The
requests go through :class:`connector.client.admin.BrokerAdminClient`; this module only formats (a real 4.9.8
broker's missing HA keys show as "n/a"). Output and exit codes: docs/broker_stub.md "Commands"; what
``delete-expired`` does: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "Retention".
"""

from __future__ import annotations

import io
import json
import sys
from typing import TextIO

from rich.console import Console
from rich.table import Table

from connector.client.admin import BrokerAdminClient
from connector.errors import BrokerAdminError
from connector.protocol.remoting import RequestCode

DEFAULT_TIMEOUT_S = 5.0


def _fmt_int(text: str | None) -> str:
    if text is None:
        return "n/a"
    try:
        return f"{int(text):,}"
    except ValueError:
        return text


def _ha_connections_table(conns: list[dict]) -> str:
    """The HA connections as a plain-text table (rich, no borders, no colour), indented under the report."""
    table = Table(box=None, pad_edge=False, padding=(0, 1))
    table.add_column("peer")
    for name in ("slaveAckOffset", "lagBytes", "msSinceLastRead", "bytesSent"):
        table.add_column(name, justify="right")
    table.add_column("requestedOffsetMissing")
    for c in conns:
        table.add_row(str(c.get("peer", "?")), f"{c.get('slaveAckOffset', -1):,}", f"{c.get('lagBytes', 0):,}",
                      f"{c.get('msSinceLastRead', 0):,}", f"{c.get('bytesSent', 0):,}",
                      str(c.get("requestedOffsetMissing", False)).lower())
    buf = io.StringIO()
    Console(file=buf, width=160, color_system=None, highlight=False).print(table)
    return "\n".join("    " + line.rstrip() for line in buf.getvalue().splitlines())


def format_status(addr: str, info: dict[str, str]) -> str:
    """The human-readable status report of one broker's runtime info."""
    lines = [f"broker {addr}"]
    role = info.get("brokerRole", "n/a (not a stub broker)")
    lines.append(f"  role                 {role} (brokerId {info.get('brokerId', 'n/a')}, "
                 f"version {info.get('brokerVersionDesc', '?')})")
    lines.append(f"  commitLogMinOffset   {_fmt_int(info.get('commitLogMinOffset'))}")
    lines.append(f"  commitLogMaxOffset   {_fmt_int(info.get('commitLogMaxOffset'))}")
    lines.append(f"  push2SlaveMaxOffset  {_fmt_int(info.get('push2SlaveMaxOffset'))}")
    lines.append(f"  dispatchBehindBytes  {_fmt_int(info.get('dispatchBehindBytes'))}")
    if "haMasterAddress" in info:
        lines.append(f"  haMasterAddress      {info.get('haMasterAddress') or '(unknown)'}")
        lines.append(f"  slaveConnected       {info.get('slaveConnected')}")
        lines.append(f"  masterPhyOffset      {_fmt_int(info.get('masterPhyOffset'))}")
    raw = info.get("haConnections")
    if raw is None:
        lines.append("  haConnections        n/a")
        return "\n".join(lines)
    try:
        conns = json.loads(raw)
    except ValueError:
        conns = []
    lines.append(f"  haConnections        {info.get('haConnectionCount', len(conns))}")
    if conns:
        lines.append(_ha_connections_table(conns))
    return "\n".join(lines)


def status_command(addr: str, *, as_json: bool = False, out: TextIO | None = None,
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """Print the status of the broker at ``addr``; returns the exit code."""
    out = out or sys.stdout
    try:
        with BrokerAdminClient(addr, int(timeout_s * 1000)) as admin:
            info = admin.runtime_info()
    except BrokerAdminError as exc:
        print(f"broker_stub status: cannot query {addr}: {exc}", file=sys.stderr)
        return 2
    if as_json:
        parsed: dict = dict(info)
        if "haConnections" in parsed:
            try:
                parsed["haConnections"] = json.loads(parsed["haConnections"])
            except ValueError:
                pass
        print(json.dumps(parsed, indent=2, sort_keys=True), file=out)
    else:
        print(format_status(addr, info), file=out)
    return 0


def delete_expired_command(addr: str, *, out: TextIO | None = None, timeout_s: float = 30.0) -> int:
    """DELETE_EXPIRED_COMMITLOG on ``addr``; prints files deleted and the new min offset; returns the exit code."""
    out = out or sys.stdout
    try:
        with BrokerAdminClient(addr, int(timeout_s * 1000)) as admin:
            resp = admin.invoke(RequestCode.DELETE_EXPIRED_COMMITLOG)
            info = admin.runtime_info()
    except BrokerAdminError as exc:
        print(f"broker_stub delete-expired: cannot query {addr}: {exc}", file=sys.stderr)
        return 2
    deleted = (resp.ext_fields or {}).get("deletedFiles", "?")
    print(f"deleted {deleted} CommitLog file(s); commitLogMinOffset={info.get('commitLogMinOffset')} "
          f"commitLogMaxOffset={info.get('commitLogMaxOffset')}", file=out)
    return 0
