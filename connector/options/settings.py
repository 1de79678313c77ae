"""The typed settings an HA read (:class:`FetchSettings`) and the decoder (:class:`DecodeSettings`) get, on the
driver and in every task (an InputPartition carries both).

Both are built from the declaration (:data:`connector.options.declaration.OPTIONS`): a field per option whose
``holder`` is ``fetch`` or ``decode``, named by its ``attr`` and defaulting to its declared default, plus the few
fields no single option fills (``credentials``, ``topic_tags``). A new option of either holder is one record
there and becomes a field here. The parser (:mod:`connector.options.parse`, driver only) fills them from Spark's
option map.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from connector.options.declaration import OPTIONS

#: the annotation of a settings field per option kind
_KIND_TYPES = {"int": "int", "bool": "bool", "choice": "str", "str": "str"}


def settings_class(name: str, holder: str, doc: str, extra: tuple[tuple[str, str, Any], ...] = ()) -> type:
    """A frozen, slotted dataclass ``name`` (importable as ``connector.options.settings.<name>``) with one field
    per option of ``holder`` (``attr``: its declared default) and then the ``extra`` fields ``(name, annotation,
    default)``; an extra field of an option's ``attr`` replaces that option's annotation (its parsed type)."""
    overrides = {field_name: (annotation, default) for field_name, annotation, default in extra}
    fields = []
    for option in OPTIONS.held_by(holder):
        annotation, default = overrides.pop(option.attr, (None, option.default))
        if annotation is None:
            annotation = _KIND_TYPES[option.kind] + (" | None" if option.default is None else "")
        fields.append((option.attr, annotation, dataclasses.field(default=default)))
    fields += [(field_name, annotation, dataclasses.field(default=default))
               for field_name, (annotation, default) in overrides.items()]
    return dataclasses.make_dataclass(name, fields, frozen=True, slots=True, namespace={
        "__doc__": doc, "__module__": __name__, "__qualname__": name})


FetchSettings = settings_class("FetchSettings", "fetch", """What an HA read of CommitLog bytes needs, on a task or
    the driver (carried inside every InputPartition): a field per ``fetch`` option of the declaration.

    Times in milliseconds; the defaults are the declaration's. ``fail_on_data_loss``: raise DataLossError (True) or
    skip lost bytes with a warning; ``prefetch_chunks``: received chunks held ahead of decoding; ``credentials``:
    the ACL account remoting requests are signed with (the two ``acl`` options; its repr hides the secret).
    """, extra=(("credentials", "AclCredentials | None", None),))

DecodeSettings = settings_class("DecodeSettings", "decode", """What the decoder needs to turn CommitLog bytes into
    record batches (carried inside every InputPartition): a field per ``decode`` option of the declaration.

    Sizes in bytes; the defaults are the declaration's. ``mode`` is ``PERMISSIVE`` or ``FAILFAST``; ``topics``
    (exact names) and ``topic_pattern`` (a regular expression) are exclusive, None when not given; ``topic_tags``:
    ``(topic, tags)`` pairs, sorted by topic, for the ``subscribe`` entries that carry a tag list
    (``Topic:TagA || TagB``; a record of such a topic is kept only when its TAGS property is one of them,
    docs/source.md "Tags") (:class:`connector.decode.topic_filter.TopicFilter` applies them).
    """, extra=(("topics", "frozenset[str] | None", None),
                ("topic_tags", "tuple[tuple[str, frozenset[str]], ...]", ())))
