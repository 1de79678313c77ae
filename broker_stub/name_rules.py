"""Name rules and table caps for what anonymous clients can make the broker stub store (docs/security.md
"Names and caps").

* Topic names: RocketMQ 4.9.8 ``TopicValidator.validateTopic`` — not blank, only ``^[%|a-zA-Z0-9_-]+$``,
  at most 127 characters (:func:`connector.protocol.topics.validate_topic`).
* Group names: the rules the 4.9.8 *client* applies before it sends a group (``Validators.checkGroup``) —
  not blank, at most 255 characters, the same character set as topics. A 4.9.8 broker checks nothing here;
  the stub refuses a heartbeat, pull or offset commit naming a group that breaks them, so ``../`` or a
  newline never reaches ``subscriptionGroup.json``, ``topics.json`` (the group's ``%RETRY%`` topic) or
  ``consumerOffset.json``. A retry topic ``%RETRY%<group>`` may therefore be up to 262 characters, as a
  4.9.8 broker creates it without the topic length check.
* Caps (stub-only keys, RocketMQ has none): ``maxTopicConfigNums`` topics and ``maxSubscriptionGroupNums``
  groups in the tables; past them nothing more is *created* by a send, a heartbeat or a pull (existing
  entries keep working).
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
