"""Name rules and table caps for what anonymous clients can make the broker stub store: topic names
(:func:`connector.protocol.topics.validate_topic`), group names (4.9.8's client-side ``Validators.checkGroup``
rules, which the stub enforces so no odd name reaches a config file) and the ``maxTopicConfigNums`` /
``maxSubscriptionGroupNums`` caps. The rules, refusals and why: docs/security.md "Names and caps".
"""

from __future__ import annotations

from connector.protocol.topics import VALID_TOPIC_CHARS, validate_topic

GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH (4.9.8 client)

__all__ = ["GROUP_MAX_LENGTH", "validate_group", "validate_topic"]


def validate_group(group: str | None) -> str | None:
    """A one-line error remark naming what is wrong with consumer/producer group ``group``, or None when valid.

    Rules (docs/security.md "Names and caps"): not blank, at most 255 characters, only ``^[%|a-zA-Z0-9_-]+$``.
    The remark shows at most the first 64 characters of the name (repr-escaped, so it stays one line).
    """
    if group is None or not group.strip():
        return "The specified consumer group is blank."
    shown = repr(group[:64]) + ("..." if len(group) > 64 else "")
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified consumer group {shown} is longer than {GROUP_MAX_LENGTH} characters ({len(group)})."
    if any(ch not in VALID_TOPIC_CHARS for ch in group):
        return (f"The specified consumer group {shown} contains illegal characters, "
                "allowing only ^[%|a-zA-Z0-9_-]+$")
    return None
