"""Atlas scenarios of how a transaction ends: duplicate, conflicting, late and lost END_TRANSACTIONs.

Each scenario drives a ``Rig`` through the public API and returns nothing when its entry's catalogue name
has a trace judge (the runner judges the trace), or the lines of evidence it saw otherwise. Defaults are
upstream's: transaction timeout 6 s, check interval 30 s, check max 15, Op batch 3 s.
"""

from __future__ import annotations

from txmq.atlas.rig import COMMIT, ROLLBACK, UNKNOW, Answers, Network, Rig
from txmq.protocol import Message
from txmq.trace import schema as ev

FIRST_CHECK_MS = 6_001  # the first run at which a half is older than the 6 s timeout
INTERVAL_MS = 30_000


def duplicate_commit(rig: Rig) -> None:
    """#5574: the same END_TRANSACTION(COMMIT) delivered twice (EndTransactionProcessor.processRequest
    looks the half up by offset each time and writes the real message each time)."""
    producer = rig.producer()
    request = producer.end_transaction(rig.half(producer), COMMIT)
    rig.broker.end_transaction(request)


def commit_after_check_commit(rig: Rig) -> None:
    """#8158 (1): a check answered COMMIT, then the producer's own COMMIT, delayed in the network."""
    network = Network(rig.broker)
    producer = rig.producer(Answers(COMMIT), network=network)
    network.hold = True
    producer.send_message_in_transaction(Message("T", b"x"), COMMIT)
    network.hold = False
    rig.run_check(FIRST_CHECK_MS)
    network.release()


def commit_after_check_rollback(rig: Rig) -> None:
    """#2694, #8158 (2): a listener unsure of its slow local transaction answers the check ROLLBACK; the
    local transaction then commits, and that COMMIT is applied too (the half is still readable)."""
    producer = rig.producer(Answers(ROLLBACK))
    result = rig.half(producer)
    rig.run_check(FIRST_CHECK_MS)
    rig.flush_ops()
    producer.end_transaction(result, COMMIT)


def checks_after_late_end(rig: Rig, action: str = ev.COMMIT) -> None:
    """#8158 (3): the half was renewed for a check (answered UNKNOW) before the producer's own end
    arrived; that end's Op names the original, so the renewed copy is checked again next run."""
    producer = rig.producer(Answers(UNKNOW))
    result = rig.half(producer)
    rig.run_check(FIRST_CHECK_MS)
    producer.end_transaction(result, COMMIT if action == ev.COMMIT else ROLLBACK)
    rig.flush_ops()
    rig.run_check(INTERVAL_MS)


def checks_after_rollback(rig: Rig) -> None:
    """#8158 (3) with ROLLBACK: a producer's ROLLBACK after the first renewal does not stop the checks."""
    checks_after_late_end(rig, ev.ROLLBACK)


def commit_after_discard(rig: Rig) -> list[str]:
    """#8158 (4): a half discarded after 15 checks is still readable, so a late COMMIT writes it
    (EndTransactionProcessor reads the half by offset; nothing records the discard)."""
    producer = rig.producer(Answers(UNKNOW))
    result = rig.half(producer)
    rig.runs(16, FIRST_CHECK_MS)
    producer.end_transaction(result, COMMIT)
    return _real_after_discard(rig)


def _real_after_discard(rig: Rig) -> list[str]:
    discarded: dict[str, int] = {}
    lines = []
    for e in rig.events():
        if e["event"] == ev.DISCARD:
            discarded.setdefault(e["txn"], e["seq"])
        elif e["event"] == ev.REAL_PUT and e["txn"] in discarded:
            lines.append(f"{e['txn']}: REAL_PUT at seq {e['seq']} after its DISCARD at seq "
                         f"{discarded[e['txn']]}")
    return lines


def crash_loses_buffered_op(rig: Rig) -> None:
    """#2117: a commit whose Op entry is still in the batch buffer (TransactionalOpBatchService), then a
    crash: after the restart (and the producer's next heartbeat) the half is pending, checked, and the
    COMMIT answer writes it again."""
    producer = rig.producer(Answers(COMMIT))
    producer.send_message_in_transaction(Message("T", b"x"), COMMIT)
    rig.broker.crash()
    rig.broker.restart()
    producer.heartbeat()
    rig.run_check(FIRST_CHECK_MS)


def op_buffered_when_checked(rig: Rig) -> None:
    """#10199: the Op record of a commit is written later than the check reaches its half (upstream
    stacked two 3 s batch waits through a stale lastWriteTimestamp); the check's COMMIT duplicates. Here a
    commit at age 4 s is still buffered when the run at 7 s reaches the half (S30)."""
    producer = rig.producer(Answers(COMMIT))
    result = rig.half(producer)
    rig.advance(4_000)
    producer.end_transaction(result, COMMIT)
    rig.run_check(3_000)


def end_transaction_lost(rig: Rig) -> None:
    """#2840: the one-way END_TRANSACTION(COMMIT) is lost and the listener cannot tell (it answers
    UNKNOW, e.g. it keeps no record of its transactions): the half is discarded after 15 checks."""
    network = Network(rig.broker)
    producer = rig.producer(Answers(UNKNOW), network=network)
    network.drop = True
    producer.send_message_in_transaction(Message("T", b"x"), COMMIT)
    network.drop = False
    rig.runs(16, FIRST_CHECK_MS)


def commit_inside_immunity_window(rig: Rig) -> None:
    """(code reading) A half with check immunity is re-put while young (checkPrepareQueueOffset); the
    producer's COMMIT then names the original, whose Op the copy never matches, so the copy is checked
    after the window and a COMMIT answer duplicates (S22)."""
    producer = rig.producer(Answers(COMMIT))
    result = rig.half(producer, immunity_s="60")
    rig.run_check(10_000)
    rig.advance(10_000)
    producer.end_transaction(result, COMMIT)
    rig.flush_ops()
    rig.run_check(20_000)
    rig.run_check(INTERVAL_MS)


def retried_send(rig: Rig) -> None:
    """(code reading) A send that timed out at the client was stored; the retry stores a second half with
    the same unique key. The producer ends the second only; the first is checked on its own and a
    COMMIT answer writes the message again (S33)."""
    producer = rig.producer(Answers(COMMIT))
    message = Message("T", b"x")
    key = producer.next_message_id()
    producer.send_half(message, key)
    producer.end_transaction(producer.send_half(message, key), COMMIT)
    rig.flush_ops()
    rig.run_check(FIRST_CHECK_MS)


def delay_level_on_a_transaction(rig: Rig) -> list[str]:
    """#1540: a delay level on a transactional message made the committed message loop between the
    schedule topic and the half topic; the client now clears it (DefaultMQProducerImpl
    .sendMessageInTransaction). Shown if the committed message is not visible at once."""
    producer = rig.producer(Answers(COMMIT))
    producer.send_message_in_transaction(Message("T", b"x", delay_level=3), COMMIT)
    visible = rig.broker.pull("atlas", "T", 0, 0, 8)
    return [] if [m.body for m in visible] == [b"x"] else ["the committed message is not visible"]


def immunity_rejection(rig: Rig) -> list[str]:
    """#6402 (PR #6401): a producer's own END_TRANSACTION after its half's immunity (60 s here) is refused
    with 604 (EndTransactionProcessor.checkPrepareMessage); the commit is left to the checks."""
    producer = rig.producer()
    result = rig.half(producer, immunity_s="60")
    rig.advance(65_000)
    producer.end_transaction(result, COMMIT)
    return [f"{e['txn']}: own END_TX COMMIT refused {e['result']} at age 65 s" for e in rig.events()
            if e["event"] == ev.END_TX and e["result"] == ev.IMMUNITY_REJECTED]
