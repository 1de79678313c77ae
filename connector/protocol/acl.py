"""RocketMQ 4.9.8 plain-ACL request signature (docs/security.md "Plain ACL on the remoting port").

A signed request carries three extra header fields: ``AccessKey``, optionally ``SecurityToken``, and
``Signature`` = Base64(HMAC-SHA1(secretKey, content)), where *content* is the UTF-8 concatenation of the
values of all other header fields sorted by field name (``Signature`` itself left out), followed by the
raw body bytes. The broker recomputes it over the header it received, also leaving out
``_UNIQUE_KEY_QUERY``. This module is pure: header dict and body in, strings out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def signature_content(ext_fields: Mapping[str, str], body: bytes | None, *,
                      skip: frozenset[str] = frozenset({SIGNATURE})) -> bytes:
    """The bytes a signature covers: values of ``ext_fields`` sorted by key (keys in ``skip`` left out),
    UTF-8, then ``body``. Field names are compared as Java's ``String.compareTo`` (UTF-16 units)."""
    keys = sorted((k for k in ext_fields if k not in skip), key=lambda k: k.encode("utf-16-be"))
    text = "".join("" if ext_fields[k] is None else str(ext_fields[k]) for k in keys)
    return text.encode("utf-8") + (body or b"")


def calc_signature(content: bytes, secret_key: str) -> str:
    """Base64 of HMAC-SHA1 over ``content`` keyed with the UTF-8 bytes of ``secret_key``."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True)
class AclCredentials:
    """An account's ``accessKey``/``secretKey`` (and optional ``securityToken``); the secret never shows in
    ``repr`` or logs."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def sign(self, ext_fields: dict[str, str], body: bytes | None) -> dict[str, str]:
        """Add ``AccessKey``, ``SecurityToken`` (when set) and ``Signature`` to ``ext_fields`` (in place,
        also returned), as the 4.9.8 client's ``AclClientRPCHook`` does before a request is sent."""
        ext_fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            ext_fields[SECURITY_TOKEN] = self.security_token
        ext_fields.pop(SIGNATURE, None)
        ext_fields[SIGNATURE] = calc_signature(signature_content(ext_fields, body), self.secret_key)
        return ext_fields


def credentials(access_key: str | None, secret_key: str | None) -> AclCredentials | None:
    """Credentials when both keys are given, None when neither is. Raises ValueError when only one is."""
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ValueError("accessKey and secretKey must be given together")
    return AclCredentials(access_key, secret_key)
