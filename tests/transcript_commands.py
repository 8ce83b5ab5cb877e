"""The commands of the scenario transcripts (``tests/transcripts.py``), one line each, ``name key=value ...``.
Producers are named: ``producer=P`` names one (of group ``group``, G by default); without it, a command
means the producer named after its group (``group=G``, G by default). Transactions are named ``t1``,
``t2``, ... in the order they appear; ``txn=`` picks one (the last one sent by default).

The broker and its producers:

- ``broker key=value ...``: the broker's settings (``BrokerConfig`` fields, e.g.
  ``reject_transaction_message=True``, ``op_buffer_capacity=3``), before any other command;
- ``fault refuse_commits=N``: the store refuses the next N committed real messages (an injected fault,
  ``txmq.store.faults``), as a full or failing store would;
- ``producer-down``: the producer shuts down (unregisters);
- ``heartbeat``: the producer sends its heartbeat (registering again with a broker that restarted: a
  restarted rocketmq broker knows no producer until then);
- ``crash``, ``restart``: the broker process dies (what it held in memory is lost) and starts again.

A producer's requests:

- ``send body=B action=COMMIT|ROLLBACK|UNKNOWN|NONE [queue=N] [immunity=S] [key=K] [born=MS]``: a
  transactional send whose local transaction answers ``action``, with the property
  ``CHECK_IMMUNITY_TIME_IN_SECONDS`` set to ``S`` if given. ``NONE`` sends the half only (no local
  transaction, no END_TRANSACTION), with the unique key ``K`` if given (a retried send reuses it), born
  ``MS`` ms from the broker's now (a producer whose clock is ahead, or an old half) if given;
- ``end action=A [txn=tN] [from_check=True]``: the producer sends END_TRANSACTION(``A``) for the
  transaction's half, one-way, as a producer ending it late or again would (or, with ``from_check``, as
  its answer to a check);
- ``request [txn=tN] [action=COMMIT] [group=G] [half_offset=N] [commitlog_offset=N] [from_check=True]``:
  an END_TRANSACTION straight to the broker, for the transaction's half unless a field is given, and the
  broker's answer (``answer NAME code=C remark=R``) that a one-way producer never sees;
- ``answer action=A [delay=MS]``: what the producer answers checks from now on, each answer taking ``MS``
  ms of the broker's clock if given (a slow producer);
- ``hold``: the producer's END_TRANSACTION requests (its answers to checks among them) are held in the
  network from now on; ``release [index=N]``: the N-th held request (0, the oldest, by default) arrives,
  and the broker's answer (or ``nothing held``).

Time and the broker's services:

- ``advance ms=N``: the broker's clock moves on;
- ``check [after=N] [full-disk=True]``: advance N ms, then one check run; with ``full-disk``, on a disk
  with no room left past the commit log's end (a file size limit: give the log a head start over every
  other file of the process with ``pad-log`` first, as the limit holds for all of them);
- ``pad-log``: a plain 256 KiB message to topic PAD, that head start;
- ``flush-ops [force=True]``: the Op batch service's tick (its count of Op records written follows the
  events); with ``force``, every buffered entry is written, due or not;
- ``tick``: every timed service whose time has come runs (the Op batch service among them);
- ``resume [index=N]``: the administrator resumes the N-th record of ``TRANS_CHECK_MAX_TIME_TOPIC``
  (RESUME_CHECK_HALF_MESSAGE), and what the broker answers.

What a user can see:

- ``visible [topic=T]``: the messages a new consumer group would read, as ``topic/queue@offset body``;
- ``discarded``: the records of ``TRANS_CHECK_MAX_TIME_TOPIC``, with their check counts;
- ``log-end``: where the commit log ends (unchanged: nothing was written, traced or not);
- ``stats counters=A,B``: those of the broker's counters (``Broker.broker_stats``);
- ``state [txn=tN]``: the transaction's state as the broker tells it (strict: its resolution index;
  rocketmq: what the log shows).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brokerkit import Env, ScriptedListener, file_size_limit, pad_log, send

from txmq.protocol import (
    EndTransactionRequest,
    EndTransactionResult,
    LocalTransactionState,
    Message,
    MessageExt,
)

if TYPE_CHECKING:
    from transcripts import Session

ACTIONS = {state.action: state for state in LocalTransactionState}  # COMMIT, ROLLBACK, UNKNOWN
IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"  # MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS


class TranscriptListener(ScriptedListener):
    """A ScriptedListener whose checks may each take ``delay_ms`` of the broker's clock."""

    def __init__(self, env: Env) -> None:
        super().__init__()
        self.env = env
        self.delay_ms = 0

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        self.env.advance(self.delay_ms)
        return super().check_local_transaction(message)


def _value(text: str) -> Any:
    """A setting's value as written: a whole number, True or False, or else the text."""
    if text in ("True", "False"):
        return text == "True"
    return int(text) if text.lstrip("-").isdigit() else text


def _who(args: dict[str, str]) -> tuple[str, str]:
    """The name and group of the producer the command names (see the module's docstring)."""
    group = args.get("group", "G")
    return args.get("producer", group), group


def _named(session: Session, args: dict[str, str]) -> Any:
    """The producer the command names, started now if it is new."""
    return session.producer(*_who(args))


def _txn(session: Session, args: dict[str, str]) -> tuple[Any, Any]:
    """The producer that sent the named transaction (the last one sent by default), and its send result."""
    name, result = session.sent[args.get("txn", list(session.sent)[-1])]
    return session.producers[name], result


def _answer_line(answer: EndTransactionResult) -> list[str]:
    return [" ".join([f"answer {answer.name} code={answer.code}",
                      *([f"remark={answer.remark}"] if answer.remark else [])])]


def _broker(session: Session, args: dict[str, str]) -> list[str]:
    if session.made_env is not None:
        raise ValueError("broker settings come before every other command")
    session.config.update({key: _value(text) for key, text in args.items()})
    return []


def _fault(session: Session, args: dict[str, str]) -> list[str]:
    session.env.faults.refuse_commits = int(args["refuse_commits"])
    return []


def _send(session: Session, args: dict[str, str]) -> list[str]:
    name, _ = _who(args)
    producer = _named(session, args)
    properties = {IMMUNITY: args["immunity"]} if "immunity" in args else {}
    message = Message("T", args["body"].encode(), queue_id=int(args.get("queue", 0)), properties=properties)
    if args["action"] == "NONE":
        born = session.env.clock.now_ms() + int(args["born"]) if "born" in args else None
        result = session.env.broker.send_half(message, producer.group, producer.producer_id,
                                              args.get("key") or producer.next_message_id(), born)
    else:
        result = send(producer, message.body, ACTIONS[args["action"]], queue_id=message.queue_id,
                      properties=properties)
    session.sent[session.name("txn", result.transaction_id)] = (name, result)
    return []


def _end(session: Session, args: dict[str, str]) -> list[str]:
    producer, result = _txn(session, args)
    producer.end_transaction(result, ACTIONS[args["action"]], from_check=args.get("from_check") == "True")
    return []


def _request(session: Session, args: dict[str, str]) -> list[str]:
    producer, result = _txn(session, args)
    request = EndTransactionRequest(
        producer_group=args.get("group", producer.group),
        tran_state_table_offset=int(args.get("half_offset", result.queue_offset)),
        commit_log_offset=int(args.get("commitlog_offset", result.commitlog_offset)),
        state=ACTIONS[args.get("action", "COMMIT")], from_transaction_check=args.get("from_check") == "True",
        transaction_id=result.transaction_id, producer=producer.producer_id)
    return _answer_line(session.env.broker.end_transaction(request))


def _hold(session: Session, args: dict[str, str]) -> list[str]:
    _named(session, args).transport = session.held.append
    return []


def _release(session: Session, args: dict[str, str]) -> list[str]:
    if not session.held:
        return ["nothing held"]
    return _answer_line(session.env.broker.end_transaction(session.held.pop(int(args.get("index", 0)))))


def _answer(session: Session, args: dict[str, str]) -> list[str]:
    _named(session, args)
    listener = session.listeners[_who(args)[0]]
    listener.default = ACTIONS[args["action"]]
    listener.delay_ms = int(args.get("delay", 0))
    return []


def _producer_down(session: Session, args: dict[str, str]) -> list[str]:
    session.producers.pop(_who(args)[0]).shutdown()
    return []


def _resume(session: Session, args: dict[str, str]) -> list[str]:
    record = session.env.broker.discarded_messages()[int(args.get("index", 0))]
    resumed = session.env.broker.resume_check_half_message(record.commitlog_offset)
    return [f"resumed {session.name('txn', resumed.transaction_id)} as half_offset={resumed.queue_offset} "
            f"commitlog_offset={resumed.commitlog_offset} real queue={resumed.queue_id}"]


def _visible(session: Session, args: dict[str, str]) -> list[str]:
    topic = args.get("topic", "T")
    return [f"{m.topic}/{m.queue_id}@{m.queue_offset} {m.body.decode()} "
            f"txn={session.name('txn', m.transaction_id)}" for m in session.env.visible(topic)] \
        or ["nothing visible"]


def _discarded(session: Session, args: dict[str, str]) -> list[str]:
    return [f"{m.topic}@{m.queue_offset} {m.body.decode()} txn={session.name('txn', m.transaction_id)} "
            f"group={m.properties['PGROUP']} real={m.properties['REAL_TOPIC']}/{m.properties['REAL_QID']} "
            f"checks={m.properties.get('TRANSACTION_CHECK_TIMES')}"
            for m in session.env.broker.discarded_messages()] or ["nothing discarded"]


def _state(session: Session, args: dict[str, str]) -> list[str]:
    _, result = _txn(session, args)
    state = session.env.broker.transaction_state(result.transaction_id)
    return [f"{session.name('txn', result.transaction_id)} {state.name}"]


def _flush_ops(session: Session, args: dict[str, str]) -> list[str]:
    written = session.env.broker.flush_op_batches(force=args.get("force") == "True")
    return [f"flushed {written} Op record(s)"]


def _check(session: Session, args: dict[str, str]) -> None:
    if args.get("full-disk") != "True":
        session.env.run_check(int(args.get("after", 0)))
        return
    session.env.advance(int(args.get("after", 0)))
    with file_size_limit(session.env.broker.admin.commitlog_max_offset()):
        session.env.broker.run_check_once()


def _on_broker(action: Callable[[Session, dict[str, str]], object]) -> Callable[[Session, dict[str, str]],
                                                                               list[str]]:
    """A command that only acts, and shows nothing but the trace lines it makes."""
    def command(session: Session, args: dict[str, str]) -> list[str]:
        action(session, args)
        return []
    return command


COMMANDS: dict[str, Callable[[Session, dict[str, str]], list[str]]] = {
    "broker": _broker, "fault": _fault, "send": _send, "end": _end, "request": _request, "hold": _hold,
    "release": _release, "answer": _answer, "producer-down": _producer_down, "resume": _resume,
    "log-end": lambda s, a: [f"commit log ends at {s.env.broker.admin.commitlog_max_offset()}"],
    "stats": lambda s, a: [" ".join(f"{name}={s.env.broker.broker_stats()[name]}"
                                    for name in a["counters"].split(","))],
    "visible": _visible, "discarded": _discarded, "state": _state, "flush-ops": _flush_ops,
    "heartbeat": _on_broker(lambda s, a: _named(s, a).heartbeat()),
    "advance": _on_broker(lambda s, a: s.env.advance(int(a["ms"]))),
    "check": _on_broker(_check), "pad-log": _on_broker(lambda s, a: pad_log(s.env)),
    "tick": _on_broker(lambda s, a: s.env.broker.tick()),
    "crash": _on_broker(lambda s, a: s.env.broker.crash()),
    "restart": _on_broker(lambda s, a: s.env.broker.restart()),
}
