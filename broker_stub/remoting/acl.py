"""RocketMQ 4.9.8 plain ACL on the broker stub's remoting ports (``PlainAccessValidator`` /
``PlainPermissionManager`` rules, reimplemented): loads ``plain_acl.yml``, reloads it when it changes, and checks
every request before its processor runs.

The order of the checks, the refusal remarks, the admin-only codes and the reload rule: docs/security.md "Plain
ACL on the remoting port"; the signature: :func:`connector.protocol.acl.calc_signature`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from broker_stub.javautil import fastjson_loads
from connector.protocol.acl import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    calc_signature,
    signature_content,
)
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.protocol.topics import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from connector.protocol.topics import RMQ_SYS_TRACE_TOPIC as TRACE_TOPIC

log = logging.getLogger(__name__)

DENY, ANY, PUB, SUB = 1, 2, 4, 8  # 4.9.8 Permission bits
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
# 4.9.8 Permission.ADMIN_CODE, plus DELETE_EXPIRED_COMMITLOG (the stub serves it; a 4.9.8 broker does not)
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_EXPIRED_COMMITLOG,
})
RELOAD_CHECK_INTERVAL_S = 0.5


class AclError(ValueError):
    """A request refused by the ACL, or a ``plain_acl.yml`` the stub cannot use (the message says why)."""


def parse_perm(text: object) -> int:
    """Permission.parsePermFromString: PUB, SUB, PUB|SUB, SUB|PUB; anything else (DENY, missing) is DENY."""
    value = str(text).strip() if text is not None else ""
    return {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}.get(value, DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: DENY refuses; ANY needs PUB or SUB; else any shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


class RemoteAddressPattern:
    """One ``whiteRemoteAddress`` value as 4.9.8 reads it (IPv4 ranges; IPv6 exact addresses only).

    Blank matches nothing; ``*``/``*.*.*.*`` everything; ``a.b.c.{1,2}`` and ``a,b`` are address lists;
    a ``*`` or ``lo-hi`` in the 2nd, 3rd or 4th part is a range of that part (later parts not compared);
    anything else is one exact address. Raises AclError for a pattern it cannot read.
    """

    def __init__(self, pattern: object) -> None:
        self.text = "" if pattern is None else str(pattern).strip()
        self.any = self.text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")
        self.exact: frozenset[str] = frozenset()
        self.head: list[str] | None = None
        self.range = (0, -1)
        if not self.text or self.any:
            return
        if self.text.endswith("}") and "{" in self.text:
            base, _, alts = self.text.partition("{")
            self.exact = frozenset(base + a.strip() for a in alts[:-1].split(",") if a.strip())
        elif "," in self.text:
            self.exact = frozenset(a.strip() for a in self.text.split(",") if a.strip())
        elif "*" in self.text or "-" in self.text:
            self._parse_range()
        else:
            self.exact = frozenset({self.text})

    def _parse_range(self) -> None:
        parts = self.text.split(".")
        if ":" in self.text or len(parts) != 4:
            raise AclError(f"whiteRemoteAddress {self.text!r}: only IPv4 ranges (a.b.*.*, a.b.c.1-20) are supported")
        for i in (1, 2, 3):
            part = parts[i].strip()
            if part == "*":
                lo, hi = 0, 255
            elif "-" in part and not part.startswith("-"):
                try:
                    lo, hi = (int(x) for x in part.split("-", 1))
                except ValueError:
                    raise AclError(f"whiteRemoteAddress {self.text!r}: bad range {part!r}") from None
                if not 0 <= lo <= hi <= 255:
                    raise AclError(f"whiteRemoteAddress {self.text!r}: range {part!r} is outside 0..255")
            else:
                continue
            if any(not p.strip().isdigit() or int(p) > 255 for p in parts[:i]):
                raise AclError(f"whiteRemoteAddress {self.text!r}: parts before the range must be 0..255")
            self.head, self.range = [p.strip() for p in parts[:i]], (lo, hi)
            return
        raise AclError(f"whiteRemoteAddress {self.text!r}: no range part")

    def match(self, ip: str) -> bool:
        """True when the peer ``ip`` (text form, no port) matches."""
        if self.any:
            return True
        if ip in self.exact:
            return True
        if self.head is None:
            return False
        parts = ip.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts) or parts[:len(self.head)] != self.head:
            return False
        return self.range[0] <= int(parts[len(self.head)]) <= self.range[1]


@dataclass
class PlainAccount:
    """One ``accounts`` entry of ``plain_acl.yml``."""

    access_key: str
    secret_key: str = field(repr=False)
    white: RemoteAddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int]  # topic, or %RETRY%group → permission bits

    @classmethod
    def from_yaml(cls, obj: dict, where: str) -> PlainAccount:
        """Raises AclError (naming ``where``) for short keys or a ``Res=Perm`` entry that does not parse."""
        ak, sk = obj.get("accessKey"), obj.get("secretKey")
        if ak is None or sk is None or len(str(ak)) <= 6 or len(str(sk)) <= 6:
            raise AclError(f"{where}: accessKey and secretKey must be longer than 6 characters")
        perms: dict[str, int] = {}
        for key, is_topic in (("topicPerms", True), ("groupPerms", False)):
            for entry in obj.get(key) or []:
                name, sep, perm = str(entry).partition("=")
                if not sep or not name.strip() or "=" in perm:
                    raise AclError(f"{where}: {key} entry {entry!r} is not Res=Perm (e.g. topicA=SUB)")
                res = name.strip() if is_topic else RETRY_PREFIX + name.strip()
                perms[res] = parse_perm(perm)
        return cls(str(ak), str(sk), RemoteAddressPattern(obj.get("whiteRemoteAddress")),
                   str(obj.get("admin", False)).lower() == "true", parse_perm(obj.get("defaultTopicPerm")),
                   parse_perm(obj.get("defaultGroupPerm")), perms)


@dataclass
class PlainAclConfig:
    """A loaded ``plain_acl.yml``: global white addresses and accounts by accessKey."""

    global_white: list[RemoteAddressPattern]
    accounts: dict[str, PlainAccount]

    @classmethod
    def load(cls, path: Path) -> PlainAclConfig:
        """Read ``path``; a missing or empty file gives no accounts. Raises AclError naming the file."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls([], {})
        except (OSError, UnicodeDecodeError) as exc:
            raise AclError(f"{path}: unreadable ({exc})") from None
        try:
            obj = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise AclError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
        if obj is None:
            return cls([], {})
        if not isinstance(obj, dict):
            raise AclError(f"{path}: the top level is not a mapping")
        white = [RemoteAddressPattern(p) for p in obj.get("globalWhiteRemoteAddresses") or []]
        accounts: dict[str, PlainAccount] = {}
        for i, acc in enumerate(obj.get("accounts") or []):
            if not isinstance(acc, dict):
                raise AclError(f"{path}: accounts[{i}] is not a mapping")
            account = PlainAccount.from_yaml(acc, f"{path}: accounts[{i}]")
            accounts.setdefault(account.access_key, account)  # the first definition wins, as 4.9.8
        return cls(white, accounts)


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """PlainAccessValidator.parse: the topics and ``%RETRY%`` groups a request touches, with the permission
    each needs. Raises AclError when a heartbeat body is not HeartbeatData JSON."""
    ext, code, needed = request.ext_fields or {}, request.code, {}

    def add(resource: object, perm: int, *, group: bool = False) -> None:
        if resource is not None:  # a missing name is no resource (PlainAccessResource.addResourceAndPerm)
            needed[(RETRY_PREFIX if group else "") + str(resource)] = perm

    def topic_or_retry(topic: str | None, group: str | None) -> None:
        if topic is not None and topic.startswith(RETRY_PREFIX):
            add(group, SUB, group=True)
        else:
            add(topic, PUB)

    if code == RequestCode.SEND_MESSAGE:
        topic_or_retry(ext.get("topic"), ext.get("group", ext.get("producerGroup")))
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):  # batch: stub addition
        topic_or_retry(ext.get("b"), ext.get("a"))  # V2 short names: a=producerGroup, b=topic
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(ext.get("group"), SUB, group=True)
    elif code == RequestCode.PULL_MESSAGE:
        add(ext.get("topic"), SUB)
        add(ext.get("consumerGroup"), SUB, group=True)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            data = fastjson_loads(request.body)
            for consumer in data.get("consumerDataSet") or []:
                add(consumer.get("groupName"), SUB, group=True)
                for sub in consumer.get("subscriptionDataSet") or []:
                    add(sub.get("topic"), SUB)
        except (UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
            raise AclError(f"HeartbeatData does not parse: {exc}") from None
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        add(ext.get("consumerGroup"), SUB, group=True)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        add(ext.get("consumerGroup"), SUB, group=True)
        add(ext.get("topic"), SUB)
    return needed


class PlainAccessValidator:
    """Checks requests against ``plain_acl.yml`` (see module doc); reloads the file when it changes."""

    def __init__(self, path: Path) -> None:
        """Raises AclError when the file exists but cannot be used (the broker then refuses to start)."""
        self.path = Path(path)
        self._stamp = self._file_stamp()
        self.config = PlainAclConfig.load(self.path)
        self._next_check = time.monotonic() + RELOAD_CHECK_INTERVAL_S
        if not self.config.accounts and not self.config.global_white:
            log.warning("acl enabled but %s has no accounts and no global white addresses: every request "
                        "is refused", self.path)
        log.info("acl loaded path=%s accounts=%d globalWhiteRemoteAddresses=%d", self.path,
                 len(self.config.accounts), len(self.config.global_white))

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + RELOAD_CHECK_INTERVAL_S
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self.config = PlainAclConfig.load(self.path)
        except AclError as exc:  # keep serving with the last good file
            log.error("acl reload failed, keeping the previous rules: %s", exc)
            return
        log.info("acl reloaded path=%s accounts=%d", self.path, len(self.config.accounts))

    def check(self, request: RemotingCommand, peer_ip: str) -> str | None:
        """None when ``request`` from ``peer_ip`` is allowed, else the refusal remark (one line)."""
        self._maybe_reload()
        try:
            self._validate(request, peer_ip)
        except AclError as exc:
            return f"{ACL_EXCEPTION}: {exc}"
        return None

    def _validate(self, request: RemotingCommand, peer_ip: str) -> None:
        cfg = self.config
        if any(p.match(peer_ip) for p in cfg.global_white):
            return
        ext = request.ext_fields or {}
        needed = needed_resources(request)
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclError("No accessKey is configured")
        account = cfg.accounts.get(access_key)
        if account is None:
            raise AclError(f"No acl config for {access_key}")
        if account.white.match(peer_ip):
            return
        content = signature_content(ext, request.body, skip=frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG}))
        if calc_signature(content, account.secret_key) != ext.get(SIGNATURE):
            raise AclError(f"Check signature failed for accessKey={access_key}")
        if needed.get(TRACE_TOPIC) == PUB:
            return
        self._check_perms(request.code, needed, account)

    @staticmethod
    def _check_perms(code: int, needed: dict[str, int], account: PlainAccount) -> None:
        if code in ADMIN_CODES and not account.admin:
            raise AclError(f"Need admin permission for request code={code}, but accessKey={account.access_key} "
                           "is not")
        if account.admin and not account.perms:  # 4.9.8: an admin without per-resource perms may do anything
            return
        for resource, perm in needed.items():
            is_group = resource.startswith(RETRY_PREFIX)
            owned = account.perms.get(resource)
            if owned is None:
                owned = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(perm, owned):
                shown = f"group:{resource[len(RETRY_PREFIX):]}" if is_group else f"topic:{resource}"
                raise AclError(f"No default permission for {shown}")


def validator_for(rocketmq_home: str | None, acl_enable: bool) -> PlainAccessValidator | None:
    """The validator of a broker (None when ``aclEnable`` is false): ``{home}/conf/plain_acl.yml`` where home
    is the ``rocketmqHome`` key, else the ``ROCKETMQ_HOME`` environment variable (4.9.8 reads the same file
    under ROCKETMQ_HOME). Raises AclError when no home is set or the file cannot be used."""
    if not acl_enable:
        return None
    home = rocketmq_home or os.environ.get("ROCKETMQ_HOME")
    if not home:
        raise AclError("aclEnable=true needs rocketmqHome (or the ROCKETMQ_HOME environment variable): "
                       "the rules are read from {home}/conf/plain_acl.yml")
    return PlainAccessValidator(Path(home) / "conf" / "plain_acl.yml")


__all__ = ["ACL_EXCEPTION", "ADMIN_CODES", "AclError", "PlainAccessValidator", "PlainAclConfig",
           "RemoteAddressPattern", "SECURITY_TOKEN", "check_permission", "needed_resources", "parse_perm",
           "validator_for"]
