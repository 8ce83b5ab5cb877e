"""Runs the audit's plan against an endpoint through the official RocketMQ Python client, recording the
history.

Producers share one table of local transactions (an application's database): whichever producer a check
reaches answers from it, as any instance of an application would. Checks are answered by this module, not
by the client's built-in path: the client would send the answer without letting us see when its
EndTransaction returned, and the linearizability check needs that interval. ``AuditProducer`` therefore
takes the check command itself and sends the answer with the client's own ``end_transaction``.

Consumers are simple consumers of one group: they receive, and ack unless the plan says to let the
invisible time lapse on that delivery. After a restart of a launched endpoint the official client
reconnects only when gRPC's reconnect backoff lets it (seconds to minutes), and re-opens its Telemetry
stream (the only way checks reach it) only at its next settings sync, minutes later; so the driver then
starts fresh producers and consumers, as an application's health check would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, SimpleConsumer

from txmq.audit.blind import downtime_s, unheard_windows
from txmq.audit.checkers import open_transactions
from txmq.audit.history import History, Record
from txmq.audit.nemesis import Nemesis
from txmq.audit.producers import AuditProducer, LocalTransactions, on_the_clients_io_loop
from txmq.audit.workload import Fault, Plan, PlannedTx
from txmq.errors import BrokerUnavailableError

_RECEIVE_BATCH = 16
# The workload stops when this many sends failed before any succeeded (a topic the endpoint does not
# have, an endpoint that is not RocketMQ): the audit would judge nothing, and must not pass.
_FAILED_SENDS_BEFORE_GIVING_UP = 5


@dataclass(frozen=True)
class DriverSettings:
    """What the driver needs besides the plan."""

    endpoint: str
    topic: str
    group: str
    consumers: int
    invisible_s: int  # invisible time asked for on each receive
    settle_s: float  # how long after the workload the audit waits for things to settle
    check_max: int  # the endpoint's check limit: a never-deciding transaction is settled at it
    request_timeout_s: float = 5
    heartbeat_s: float | None = None  # checks lost before the group's heartbeat count (txmq.audit.blind)
    check_interval_s: float = 30.0  # the endpoint's check interval (how many checks such a loss may take)
    group_churn_s: float | None = None  # over remoting: the workload's length, for the members' schedule


class Driver:
    """One run of a plan: producers, consumers, the nemesis, and the history they write."""

    def __init__(self, plan: Plan, settings: DriverSettings, history: History,
                 launched: Nemesis | None = None, progress: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.settings = settings
        self.history = history
        self.launched = launched
        self.progress = progress or (lambda line: None)
        self.local = LocalTransactions(plan, history)
        self.config = ClientConfiguration(settings.endpoint, Credentials("", ""),
                                          request_timeout=settings.request_timeout_s)
        # check answers are synchronous calls; a backlog here makes answers late and the endpoint give up
        self.answers = ThreadPoolExecutor(max_workers=16, thread_name_prefix="audit-check")
        self.lifecycles = ThreadPoolExecutor(max_workers=64, thread_name_prefix="audit-tx")
        self._lock = threading.Lock()
        self._producers: list[AuditProducer] = []  # one per slot, replaced when the plan closes one
        self._spares: list[AuditProducer] = []  # replaced ones, kept for their transactions in flight
        self._closers: list[threading.Thread] = []  # producer-closed faults' shutdowns (_close_when_idle)
        self._generation = 0
        self._consumers: list[Any] = []
        self.delivered: set[str] = set()  # transactions received and acked at least once
        self.stop = threading.Event()  # the settle phase ended: waits give up
        self._consuming = threading.Event()

    # ------------------------------------------------------------------ clients
    def _new_producer(self, name: str) -> Any:
        """A producer not yet started: ``startup()``, ``shutdown()``, ``name`` and ``client_id``."""
        return AuditProducer(name, self.config, self.settings.topic, self.local, self.history, self.answers)

    def _start_producer(self, slot: str) -> Any:
        with self._lock:
            self._generation += 1
            name = f"{slot}.{self._generation}"
        producer = self._new_producer(name)
        on_the_clients_io_loop()  # a replacement starts on a transaction's thread
        try:
            producer.startup()
        except Exception as exc:
            self.history.add("error", what="producer start", producer=name, error=str(exc)[:300])
            raise BrokerUnavailableError(f"cannot start a producer at {self.settings.endpoint}: "
                                         f"{_one_line(exc)}") from None
        # the client id is what the endpoint knows the producer by (its logs, txmq serve's trace)
        self.history.add("client", action="start", producer=name, client_id=producer.client_id)
        return producer

    def _start_consumer(self) -> Any:
        consumer = SimpleConsumer(self.config, self.settings.group,
                                  {self.settings.topic: FilterExpression("*")}, await_duration=2)
        on_the_clients_io_loop()
        try:
            consumer.startup()
        except Exception as exc:
            raise BrokerUnavailableError(f"cannot start a consumer at {self.settings.endpoint}: "
                                         f"{_one_line(exc)}") from None
        return consumer

    def _close_producer(self, slot: int) -> None:
        """The producer-closed fault: start a replacement for the slot's producer, and shut the closed one
        down once the slot's other transactions in flight on it are done (``_close_when_idle``)."""
        with self._lock:
            closing = self._producers[slot]
        replacement = self._start_producer(f"p{slot}")
        with self._lock:
            self._producers[slot] = replacement
            self._spares.append(closing)
        closer = threading.Thread(target=self._close_when_idle, args=(closing,), daemon=True)
        self._closers.append(closer)
        closer.start()

    def _close_when_idle(self, closing: AuditProducer) -> None:
        """Shut ``closing`` down as an application's graceful shutdown would: after the transactions it
        is still sending or ending (a late end waits for the first check) are done. The fault is meant
        for one transaction; cutting off the ends of others would make their outcome depend on how the
        endpoint's timing falls against the workload's, which ``txmq diff`` cannot compare. The
        ``closing`` record opens the window in which a check relayed to it may be lost
        (``txmq.audit.blind.closing_windows``)."""
        closing.wait_idle(self.stop)
        self.history.add("client", action="closing", producer=closing.name)
        _shutdown_quietly(closing)
        self.history.add("client", action="stop", producer=closing.name)
        with self._lock:
            self._spares.remove(closing)

    # ------------------------------------------------------------------ transactions
    def _end(self, tx: PlannedTx, producer: AuditProducer, transaction: Any, action: str) -> None:
        try:
            with self.history.call("end", tx=tx.name, action=action, source="client", producer=producer.name):
                (transaction.commit if action == "COMMIT" else transaction.rollback)()
        except Exception:  # recorded; the endpoint checks the transaction instead
            pass

    def _run_tx(self, tx: PlannedTx) -> None:
        with self._lock:  # taken with the lock, so that a close of the slot sees it in use
            producer = self._producers[tx.producer]
            producer.take()
        try:
            self._run_tx_with(tx, producer)
        finally:
            producer.release()

    def _run_tx_with(self, tx: PlannedTx, producer: AuditProducer) -> None:
        message = Message()
        message.topic = self.settings.topic
        message.body = tx.name.encode()
        try:
            # ``wall``: when the client stamps the message's born time, which it truncates to the second
            with self.history.call("send", tx=tx.name, producer=producer.name,
                                   wall=round(time.time(), 6)) as record:
                transaction = producer.begin_transaction()
                receipt = producer.send(message, transaction)
                record["message_id"] = receipt.message_id
                record["transaction_id"] = receipt.transaction_id
        except Exception:
            self.local.decide(tx.name, "ROLLBACK")  # the application saw its send fail and rolls back
            return
        decision = tx.fate.decision
        if tx.fault is Fault.LATE_AFTER_ROLLBACK:
            self._late(tx, producer, transaction, "COMMIT", decide_after_check=True)
            return
        if not tx.fate.ends_itself:
            return  # unknown-then-decide and never-deciding transactions are driven by checks
        assert decision is not None
        self.local.decide(tx.name, decision)
        if tx.fault is Fault.PRODUCER_CLOSED:
            self.history.add("fault", tx=tx.name, fault=tx.fault.value, producer=producer.name)
            self._close_producer(tx.producer)
        elif tx.fault is Fault.WITHHELD:
            self.history.add("fault", tx=tx.name, fault=tx.fault.value)
        elif tx.fault is Fault.LATE:
            self._late(tx, producer, transaction, decision, decide_after_check=False)
        else:
            self._end(tx, producer, transaction, decision)
            if tx.fault is Fault.DUPLICATED:
                self.history.add("fault", tx=tx.name, fault=tx.fault.value)
                self._end(tx, producer, transaction, decision)

    def _late(self, tx: PlannedTx, producer: AuditProducer, transaction: Any, action: str,
              decide_after_check: bool) -> None:
        """Send the end-transaction only after the first check was answered (or the audit is ending)."""
        self.local.wait_checked(tx.name, self.stop, self.settings.settle_s)
        if decide_after_check:
            self.local.decide(tx.name, action)
        self.history.add("fault", tx=tx.name, fault=tx.fault.value)
        self._end(tx, producer, transaction, action)

    # ------------------------------------------------------------------ consumers
    def _consume(self, index: int) -> None:
        name = f"c{index}"
        while self._consuming.is_set():
            with self._lock:
                consumer = self._consumers[index]
            invoked = self.history.now()
            try:
                messages = consumer.receive(_RECEIVE_BATCH, self.settings.invisible_s)
            except Exception as exc:
                self.history.add("error", what="receive", consumer=name, error=_one_line(exc)[:300])
                time.sleep(0.2)
                continue
            returned = self.history.now()
            for message in messages:
                tx = message.body.decode(errors="replace")
                attempt = message.delivery_attempt
                self.history.add("deliver", tx=tx, attempt=attempt, message_id=message.message_id,
                                 consumer=name, invoked=invoked, returned=returned)
                if self.plan.lapses(tx, attempt):
                    self.history.add("lapse", tx=tx, attempt=attempt, consumer=name)
                    continue
                try:
                    with self.history.call("ack", tx=tx, attempt=attempt, consumer=name):
                        consumer.ack(message)
                except Exception:
                    continue
                with self._lock:
                    self.delivered.add(tx)

    # ------------------------------------------------------------------ the run
    def _restart_endpoint(self) -> None:
        """Kill and restart the endpoint, then give every slot fresh clients (see the module docstring);
        the old producers are kept for the transactions they have in flight."""
        assert self.launched is not None
        try:
            self.launched.restart()
            producers = [self._start_producer(f"p{slot}") for slot in range(len(self._producers))]
            consumers = [self._start_consumer() for _ in self._consumers]
        except BrokerUnavailableError as exc:
            self.history.add("error", what="restart", error=str(exc))
            return
        with self._lock:
            self._spares += self._producers
            self._producers = producers
            old_consumers, self._consumers = self._consumers, consumers
        for consumer in old_consumers:
            _shutdown_quietly(consumer)

    def _settled(self) -> bool:
        """Every planned transaction was sent, and none is still open (``checkers.open_transactions``)."""
        records = self.history.records
        sends = {r["tx"] for r in records if r["ev"] == "send"}
        return (len(sends) == len(self.plan.transactions)
                and not open_transactions(records, self.settings.check_max, self._heartbeat_to_trust(records),
                                          self.settings.check_interval_s, now=self.history.now()))

    def _heartbeat_to_trust(self, records: list[Record]) -> float | None:
        """The heartbeat with which to count checks lost before the endpoint heard the producer group
        (``txmq.audit.blind``), or None while that estimate is too fresh to end the settle phase on.

        Until two check intervals after the last such window closed, the endpoint may still be checking
        transactions the estimate counts as checked out: after a 30-second restart of upstream's proxy its
        first check came 4 s after the settle phase had ended on the estimate, and the audit called the
        transaction stuck. Nor while a window is still open: a proxy killed during the settle phase, and
        not yet back, had the estimate count checks lost in the window before it and end the settle phase
        while the endpoint was down; its checks resumed 4 s later, and three transactions were called
        stuck (a fresh-clone CI run). The report counts the estimate either way."""
        heartbeat = self.settings.heartbeat_s
        windows = unheard_windows(records, heartbeat, open_until=float("inf"))  # records in time order
        heard = max((end for _, end in windows), default=float("-inf"))
        if self.history.now() < heard + 2 * self.settings.check_interval_s:
            return None
        return heartbeat

    def _report_progress(self, phase: str, started: float) -> None:
        records = self.history.records
        counts = {ev: sum(1 for r in records if r["ev"] == ev) for ev in ("send", "check", "deliver")}
        with self._lock:
            delivered = len(self.delivered)
        self.progress(f"{phase} {time.monotonic() - started:5.1f} s: {counts['send']} sent, "
                      f"{counts['check']} checks, {counts['deliver']} deliveries "
                      f"({delivered} transactions acked)")

    def _start_clients(self) -> None:
        """One producer per slot of the plan, then the consumers."""
        producers = 1 + max(t.producer for t in self.plan.transactions)
        self._producers = [self._start_producer(f"p{i}") for i in range(producers)]
        self._consumers = [self._start_consumer() for _ in range(self.settings.consumers)]

    def run(self) -> None:
        """Start the clients, run the plan, settle, and shut everything down."""
        self._start_clients()
        self._consuming.set()
        consumer_threads = [threading.Thread(target=self._consume, args=(i,), daemon=True)
                            for i in range(self.settings.consumers)]
        for thread in consumer_threads:
            thread.start()
        try:
            self._workload()
            self._settle()
        finally:
            self.stop.set()
            self.lifecycles.shutdown(wait=True)
            for closer in self._closers:
                closer.join(15)
            self._consuming.clear()
            for thread in consumer_threads:
                thread.join(10)
            self.answers.shutdown(wait=True)
            with self._lock:
                clients = [*self._producers, *self._spares, *self._consumers]
            for client in clients:
                _shutdown_quietly(client)

    def _workload(self) -> None:
        started = time.monotonic()
        nemesis = None
        if self.launched is not None and self.plan.kills_at_s:
            nemesis = threading.Thread(target=self._nemesis, args=(started,), daemon=True)
            nemesis.start()
        last_progress = started
        for tx in self.plan.transactions:
            delay = tx.at_s - (time.monotonic() - started)
            if delay > 0:
                time.sleep(delay)
            self._give_up_if_nothing_sends()
            self.lifecycles.submit(self._run_tx, tx)
            if time.monotonic() - last_progress >= 2:
                last_progress = time.monotonic()
                self._report_progress("workload", started)
        if nemesis is not None:
            nemesis.join()

    def _give_up_if_nothing_sends(self) -> None:
        sends = [r for r in self.history.records if r["ev"] == "send"]
        failed = [r for r in sends if not r["ok"]]
        if len(failed) >= _FAILED_SENDS_BEFORE_GIVING_UP and len(failed) == len(sends):
            raise BrokerUnavailableError(
                f"no transaction could be sent to {self.settings.endpoint} (topic {self.settings.topic}): "
                f"{_one_line(failed[0]['error'])[:200]}; is {self.settings.topic} a TRANSACTION topic there? "
                "name one with --topic")

    def _nemesis(self, started: float) -> None:
        """Kill and restart the launched endpoint at the plan's moments, one restart at a time (a kill
        due while the endpoint is still starting waits for it to be up)."""
        for kill_at in self.plan.kills_at_s:
            delay = kill_at - (time.monotonic() - started)
            if delay > 0:
                time.sleep(delay)
            self._restart_endpoint()

    def _settle(self) -> None:
        """Wait until nothing is open, or for the settle time plus the time the nemesis held the endpoint
        down: upstream checks nothing while down, so a transaction alive across a 23-second kill of
        broker and proxy and a 10-second kill of the proxy was still being checked when a settle time
        that ignored both ran out (two fresh-clone CI runs, transactions called stuck)."""
        started = time.monotonic()
        last_progress = started

        def waiting() -> bool:
            limit = self.settings.settle_s + downtime_s(self.history.records, self.history.now())
            return time.monotonic() - started < limit and not self._settled()

        while waiting():
            time.sleep(0.2)
            if time.monotonic() - last_progress >= 2:
                last_progress = time.monotonic()
                self._report_progress("settling", started)
        # one more receive round after settling: a duplicate delivery may still be on its way
        time.sleep(min(3.0, self.settings.settle_s))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _shutdown_quietly(client: Any) -> None:
    """Shut a client down on a thread of its own, giving up after a few seconds (a dead endpoint can make
    the client's shutdown wait for its RPC timeouts)."""
    thread = threading.Thread(target=_shutdown, args=(client,), daemon=True)
    thread.start()
    thread.join(10)


def _shutdown(client: Any) -> None:
    try:
        client.shutdown()
    except Exception:
        pass
