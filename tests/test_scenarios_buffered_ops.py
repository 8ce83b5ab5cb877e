"""A check run that meets Op entries not yet written (RIP-50's batching; S30 and S41 beyond their
transcripts in tests/testdata/transcripts). Rocketmq mode checks a committed half whose Op entry is still
buffered when the run reads the Op queue, is written during the run, or is written while the run sleeps
after finding the Op queue drained; strict mode's resolution index knows the half is committed and
skips it, without sleeping.
"""

from __future__ import annotations

from brokerkit import COMMIT, Env, EnvFactory, ScriptedListener, send

from txmq.checks.durable_op import checks_after_durable_op
from txmq.protocol import Message
from txmq.trace import schema as ev


def op_still_buffered_when_checked(env: Env) -> None:
    """S30's set-up: commit at age 4 s, the run reaches the half at age 7 s before any batch tick."""
    producer = env.producer("G", ScriptedListener(COMMIT))
    result = producer.send_half(Message("T", b"x"))
    env.advance(4_000)
    producer.end_transaction(result, COMMIT)
    env.advance(3_000)


def test_s30_op_not_yet_flushed_when_checked_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    op_still_buffered_when_checked(env)

    report = env.run_check()

    assert (report.checks, report.skipped_resolved) == (0, 1)
    assert env.bodies() == [b"x"]


def test_s30_op_not_yet_flushed_when_checked_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    op_still_buffered_when_checked(env)

    report = env.run_check()

    assert report.checks == 1
    assert env.bodies() == [b"x", b"x"]


def op_written_during_a_run(env: Env) -> None:
    """S41's set-up: half 0 waits for a check whose COMMIT answer completes an Op batch during the run;
    half 1 was committed by its producer, its Op entry still buffered when the run read the Op queue."""
    producer = env.producer("G", ScriptedListener(COMMIT))
    producer.send_half(Message("T", b"checked"))
    committed = producer.send_half(Message("T", b"committed"))
    producer.end_transaction(committed, COMMIT)  # Op entry "1," buffered: 2 characters, not over 3
    env.advance(7_000)
    env.run_check()  # half 0 checked, answered COMMIT: "1,2," passes 3 characters, an Op is written


def test_s41_op_written_during_the_run_does_not_stop_a_check_rocketmq(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.check reads the Op queue until it finds it drained, then checks each
    later half old enough without reading it again; TransactionalOpBatchService writes meanwhile. The
    trace, both modes: tests/testdata/transcripts/s41_op_written_during_a_run.txt. Here, what the
    catalogue's check of NoCheckAfterDurableOp makes of that trace."""
    env = make_env("rocketmq", op_batch_max_chars=3)
    op_written_during_a_run(env)

    [op] = env.events(ev.OP_PUT)
    late = env.events(ev.CHECK)[1]
    assert checks_after_durable_op(env.sink.events) == [
        f"seq {late['seq']}: CHECK of {late['txn']} (copy at half offset 3) after OP_PUT seq {op['seq']} "
        "lists half offset 1"]


def test_s41_strict_skips_the_committed_half(make_env: EnvFactory) -> None:
    env = make_env("strict", op_batch_max_chars=3)
    op_written_during_a_run(env)

    assert checks_after_durable_op(env.sink.events) == []


def half_committed_while_the_run_sleeps(env: Env) -> tuple[str, str, int]:
    """Half 0 committed and its Op record written; half 1 never ended (born at 0 s); half 2 committed by
    its producer at 2 s, its entry buffered until the Op batch thread's next run at 5 s. The run starts
    at 4.5 s and is given a sleep that lets the clock and the timed services go on. Returns half 1's and
    half 2's transaction ids and the run's pause count."""
    producer = env.producer("G", ScriptedListener(COMMIT))
    send(producer, b"a", COMMIT)
    env.broker.flush_op_batches(force=True)  # Op record 0 lists half 0; the next batch run is at 5 s
    unknown = send(producer, b"u").transaction_id
    env.advance(2_000)
    committed = send(producer, b"h", COMMIT).transaction_id  # entry "2," buffered
    env.advance(2_500)

    def sleep(ms: int) -> None:
        env.advance(ms)
        env.broker.tick()  # the Op batch thread is due at 5 s: it writes "2," while the run sleeps

    report = env.broker.run_check_once(sleep=sleep)
    assert unknown is not None and committed is not None
    return unknown, committed, report.pauses


def test_run_sleeps_after_draining_the_op_queue_rocketmq(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.check: at half 1 (old, no Op entry) the Op queue is read again and
    found drained (NO_NEW_MSG), the run sleeps SLEEP_WHILE_NO_OP (1 s), then decides on half 1 with the
    clock read again and without reading the Op queue again. Half 2, 2.5 s old when the run began, is
    3.5 s old after the sleep: it is checked although its Op record was written during the sleep."""
    env = make_env("rocketmq", transaction_timeout_ms=3_000, op_batch_interval_ms=5_000)
    unknown, committed, pauses = half_committed_while_the_run_sleeps(env)

    assert pauses == 1
    [op] = [op for op in env.events(ev.OP_PUT) if op["half_offsets"] == [2]]
    checks = env.events(ev.CHECK)
    assert [c["txn"] for c in checks] == [unknown, committed]
    assert all(c["seq"] > op["seq"] and c["ts"] == env.clock.now_ms() for c in checks)
    assert env.bodies() == [b"a", b"h", b"u", b"h"]  # the late check's COMMIT writes half 2's body again


def test_run_sleeps_and_checks_nothing_committed_strict(make_env: EnvFactory) -> None:
    """Strict mode does not sleep (its resolution index knows half 2 is committed either way)."""
    env = make_env("strict", transaction_timeout_ms=3_000, op_batch_interval_ms=5_000)
    unknown, _, pauses = half_committed_while_the_run_sleeps(env)

    assert pauses == 0
    assert [c["txn"] for c in env.events(ev.CHECK)] == [unknown]
    assert env.bodies() == [b"a", b"h", b"u"]
