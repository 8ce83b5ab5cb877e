"""The records made from a half (``txmq.transaction.bridge``), as pure functions: what each copies from the
record it is made of and what it sets. The scenario tests see these records through the broker; these pin
the fields a scenario cannot tell apart (flags, the resume marker, the half a resumed copy continues)."""

from __future__ import annotations

from txmq.store.message import TRANSACTION_COMMIT, TRANSACTION_PREPARED, StoredMessage
from txmq.transaction.bridge import discard_of, real_message_of, renewal_of, resumed_of
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    HALF_QUEUE_ID,
    HALF_TOPIC,
    PROPERTY_DISCARDED_HALF_OFFSET,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RESUMED,
    PROPERTY_TRANSACTION_CHECK_TIMES,
)

PROPS = {"TRAN_MSG": "true", PROPERTY_TRANSACTION_CHECK_TIMES: "15", PROPERTY_REAL_TOPIC: "T",
         PROPERTY_REAL_QUEUE_ID: "2"}
SYSFLAG = TRANSACTION_PREPARED | 1  # a half, and a bit that is not the transaction type (compressed)


def _record(topic: str, queue_offset: int, **extra: str) -> StoredMessage:
    """A stored record with every field set, so that what is not copied shows."""
    return StoredMessage(topic=topic, queue_id=3, body=b"body", properties=PROPS | extra, born_timestamp=1234,
                         sysflag=SYSFLAG, flag=5, prepared_transaction_offset=77, store_timestamp=999,
                         commitlog_offset=4096, queue_offset=queue_offset)


# AdminBrokerProcessor.resumeCheckHalfMessage / toMessageExtBrokerInner: body, flags, born time and
# properties kept, check count 0, on the half topic's queue 0; the store assigns the rest.
RESUMED = StoredMessage(topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=b"body",
                        properties=PROPS | {PROPERTY_TRANSACTION_CHECK_TIMES: "0", PROPERTY_RESUMED: "1"},
                        born_timestamp=1234, sysflag=SYSFLAG, flag=5)


def test_a_resumed_discard_continues_the_half_it_discarded() -> None:
    discard = _record(CHECK_MAX_TOPIC, 0, **{PROPERTY_DISCARDED_HALF_OFFSET: "15"})
    assert resumed_of(discard) == (RESUMED, 15)


def test_a_resumed_half_continues_itself() -> None:
    assert resumed_of(_record(HALF_TOPIC, 9)) == (RESUMED, 9)


def test_a_resumed_real_message_continues_no_half() -> None:
    """Rocketmq mode re-puts even a committed real message: its queue offset is not a half's."""
    assert resumed_of(_record("T", 9)) == (RESUMED, None)


def test_a_renewal_keeps_what_ages_and_types_the_half() -> None:
    """``renewHalfMessageInner``: same place, body, flags and born time, the new count and extras."""
    renewed = renewal_of(_record(HALF_TOPIC, 9), 4, {"EXTRA": "1"})
    assert renewed == StoredMessage(topic=HALF_TOPIC, queue_id=3, body=b"body", born_timestamp=1234,
                                    properties=PROPS | {PROPERTY_TRANSACTION_CHECK_TIMES: "4", "EXTRA": "1"},
                                    sysflag=SYSFLAG, flag=5)


def test_a_discard_keeps_the_half_and_names_its_queue_offset() -> None:
    """``resolveDiscardMsg``: the copy, in the discard topic, with the half-queue offset it had."""
    expected = StoredMessage(topic=CHECK_MAX_TOPIC, queue_id=0, body=b"body", born_timestamp=1234,
                             properties=PROPS | {PROPERTY_DISCARDED_HALF_OFFSET: "9"}, sysflag=SYSFLAG,
                             flag=5)
    assert discard_of(_record(HALF_TOPIC, 9), None) == expected
    restamped = PROPS | {PROPERTY_TRANSACTION_CHECK_TIMES: "16", PROPERTY_DISCARDED_HALF_OFFSET: "9"}
    assert discard_of(_record(HALF_TOPIC, 9), 16).properties == restamped


def test_the_real_message_is_the_half_committed_in_its_real_queue() -> None:
    """``endMessageTransaction``: the real topic and queue, the type bits set to COMMIT and the other
    bits kept, the flag kept, and the half's offset as the prepared offset."""
    real = real_message_of(_record(HALF_TOPIC, 9))
    assert real == StoredMessage(topic="T", queue_id=2, body=b"body", properties=PROPS, born_timestamp=1234,
                                 sysflag=1 | TRANSACTION_COMMIT, flag=5, prepared_transaction_offset=4096)
