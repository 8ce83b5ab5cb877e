"""Atlas scenarios of the back-check service: checks never sent, discards with no check, checks after the
end, and how a run reads the half and Op queues (``TransactionalMessageServiceImpl.check``).

As in ``scenarios_resolution``: a scenario returns nothing when the runner judges its entry's catalogue
name over the trace, or its own lines of evidence.
"""

from __future__ import annotations

from txmq.atlas.rig import COMMIT, UNKNOW, Answers, Network, Rig
from txmq.atlas.scenarios_resolution import FIRST_CHECK_MS, INTERVAL_MS
from txmq.protocol import Message
from txmq.trace import schema as ev


def no_producer_online(rig: Rig) -> None:
    """(code reading) No producer of the group is online: AbstractTransactionalMessageCheckListener
    .sendCheckMessage finds no channel and only logs, yet the half was renewed with its count one higher;
    after 15 runs it is discarded (S18)."""
    producer = rig.producer()
    rig.half(producer)
    producer.shutdown()
    rig.runs(16, FIRST_CHECK_MS)


def immunity_spends_the_budget(rig: Rig) -> None:
    """#615, #8311 (2), #9320: a check immunity of 600 s, longer than 15 x 30 s: needDiscard counts every
    examination and putImmunityMsgBackToHalfQueue re-puts the copy with that count, so the half reaches
    the maximum inside its window and is discarded with no check sent (S24)."""
    rig.half(rig.producer(Answers(UNKNOW)), immunity_s="600")
    rig.runs(16, FIRST_CHECK_MS)


def last_examination_discards_a_resolved_half(rig: Rig) -> None:
    """#8311 (1): needDiscard runs before the run reads more of the Op queue, so a copy carrying 15
    checks whose COMMIT's Op lies beyond the first 32 Op records read is discarded though committed.
    The run that renews a copy to 15 discards it at once if it reaches it (``needDiscard`` comes before
    the freshness test); here a half stored as that run starts ends the run before the copy, as another
    producer's send does on a busy broker, and its check immunity keeps the next run from reading the Op
    queue on for it. Needs one Op record per commit (op_batch_max_chars 1)."""
    network = Network(rig.broker)
    rig.half(rig.producer(Answers(COMMIT), network=network))
    network.hold = True
    rig.runs(14, FIRST_CHECK_MS)
    rig.advance(INTERVAL_MS)
    rig.half(rig.producer(group="B"), immunity_s="600")
    rig.run_check()  # the 15th check; the run ends at B's half, before the copy it renewed
    others = rig.producer(Answers(COMMIT), group="C")
    for _ in range(40):
        others.send_message_in_transaction(Message("T", b"c"), COMMIT)
    rig.broker.end_transaction(network.held[-1])  # the answer to the 15th check, of the copy with 15
    rig.flush_ops()
    rig.run_check(INTERVAL_MS)


def immunity_boundary(rig: Rig) -> list[str]:
    """#544 (fixed in 4.4.0): a half with check immunity examined in the same millisecond its window
    ends was never checked. Now a run at exactly 60 s re-puts it (valueOfCurrentMinusBorn <=
    checkImmunityTime) and the next run checks it; shown if no check comes."""
    rig.half(rig.producer(Answers(UNKNOW)), immunity_s="60")
    for after in (10_000, 30_000, 20_000, INTERVAL_MS):
        rig.run_check(after)
    return [] if any(e["event"] == ev.CHECK for e in rig.events()) else ["never checked after its window"]


def producer_clock_ahead(rig: Rig) -> list[str]:
    """#9640: a producer clock 5 s ahead stamps a born time in the broker's future; a negative age
    forces a check (isNeedCheck: valueOfCurrentMinusBorn <= -1), 1 ms after the half was stored."""
    rig.producer()
    rig.broker.send_half(Message("T", b"x"), "G", "G-p", "ahead",
                         born_timestamp=rig.clock.now_ms() + 5_000)
    stored = rig.clock.now_ms()
    rig.run_check(1)
    timeout = rig.broker.config.transaction_timeout_ms
    return [f"{e['txn']}: checked {e['ts'] - stored} ms after it was stored, before the {timeout} ms timeout"
            for e in rig.events() if e["event"] == ev.CHECK and e["ts"] - stored <= timeout]


def resolved_halves_checked_again(rig: Rig) -> None:
    """#1517, #1519, #1521, #1522 (fixed after 4.5.2): processed Op offsets were not marked done, so
    resolved halves were examined and checked again. Three commits, their Ops written, three runs."""
    producer = rig.producer(Answers(COMMIT))
    for _ in range(3):
        producer.send_message_in_transaction(Message("T", b"x"), COMMIT)
    rig.flush_ops()
    rig.runs(3, FIRST_CHECK_MS)


def check_max_honoured(rig: Rig) -> list[str]:
    """#500: 4.3.0 checked 5 times by default; transactionCheckMax is 15 since. A never-deciding
    transaction gets 15 checks, then the discard; shown if it is discarded after fewer."""
    rig.half(rig.producer(Answers(UNKNOW)))
    rig.runs(16, FIRST_CHECK_MS)
    sent = sum(1 for e in rig.events() if e["event"] == ev.CHECK and e["result"] == ev.CHECK_SENT)
    discarded = any(e["event"] == ev.DISCARD for e in rig.events())
    return [f"discarded after {sent} checks"] if discarded and sent < rig.broker.config.check_max else []


def checkpoint_regression(rig: Rig) -> None:
    """(code reading) A run renews a half and moves the half checkpoint, which is persisted every 5 s
    (flushConsumerOffsetInterval); a crash before that restarts from the old checkpoint, the original is
    renewed again and two copies are checked: two live chains (S32)."""
    rig.half(rig.producer(Answers(UNKNOW)))
    rig.run_check(FIRST_CHECK_MS)
    rig.advance(4_000)
    rig.broker.crash()
    rig.broker.restart()
    rig.producer(Answers(UNKNOW))
    rig.runs(2, INTERVAL_MS)


def op_written_during_the_run(rig: Rig) -> None:
    """(code reading) A run reads the Op queue until it is drained (fillOpRemoveMap) and not again while
    opMsg is null, while TransactionalOpBatchService writes: a check's COMMIT completes an Op batch during
    the run, and a later half that batch resolves is checked anyway (S41; op_batch_max_chars 3)."""
    producer = rig.producer(Answers(COMMIT))
    producer.send_half(Message("T", b"checked"))
    committed = producer.send_half(Message("T", b"committed"))
    producer.end_transaction(committed, COMMIT)
    rig.run_check(7_000)
