"""The audit's plan driven over RocketMQ's remoting protocol (the 4.x wire, what a name server and broker
speak) through the official C++-core Python client (``txmq.audit.cpp_client``), unmodified.

The plan, the nemesis, the settle phase and the history are the gRPC driver's (``txmq.audit.driver``);
what differs is what this client can do, and the history says it as it is:

- A transactional send is one call, ``send_message_in_transaction``: the client stores the half, calls
  the local transaction with it, and sends END_TRANSACTION itself, one-way, with what that returned. So
  the send is recorded as returned when the local transaction is called (the half is stored by then), and
  the end as invoked when the local transaction returns and returned when the send call does (one-way:
  the client has written it; upstream's proxy also forwards a gRPC end one-way). A late end is the local
  transaction returning only after the first check was answered, a withheld one returning UNKNOWN (an
  END_TRANSACTION of no type, which upstream's ``EndTransactionProcessor`` ignores), a closed producer
  returning UNKNOWN and then shutting down.
- The client sends exactly one END_TRANSACTION per send: the duplicated-end fault cannot be expressed. Such
  transactions end once, and no ``fault`` record claims otherwise (the report counts applied faults).
- A check is the client's checker callback; it answers from the shared local transactions, and the client
  sends the answer one-way when the callback returns (recorded as returned then).
- Consumers: the client has a push consumer only. A delivery is its callback (invoked = returned = the
  callback's moment; attempt = ``reconsume_times`` + 1); a lapse returns RECONSUME_LATER, which sends the
  message back (CONSUMER_SEND_MSG_BACK) for a later attempt, as the invisible time's lapse does over gRPC.
  Each delivery records its position (topic, queue id, queue offset), so a message consumed again at the
  same position is told from a second copy (``txmq.audit.groups``). One push consumer, whatever
  ``--consumers`` says; with ``--group-churn`` (``DriverSettings.group_churn_s``) the group is instead
  push-consumer members in processes of their own that join, leave and crash on a schedule
  (``txmq.audit.members``).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from txmq.audit import cpp_client
from txmq.audit.driver import Driver, DriverSettings, _shutdown_quietly
from txmq.audit.history import History
from txmq.audit.member_process import ONE_AT_A_TIME
from txmq.audit.members import CHURN, FIRST_MEMBERS, GroupMember, MemberSettings
from txmq.audit.nemesis import Nemesis
from txmq.audit.producers import check_times
from txmq.audit.workload import Fault, Plan, PlannedTx
from txmq.errors import BrokerUnavailableError
from txmq.transaction.constants import PROPERTY_TRANSACTION_CHECK_TIMES

# After a late end's first check was answered, the client sends that answer when the checker returns:
# the late end waits this long more, so that it follows the answer on the wire.
_AFTER_ANSWER_S = 0.5
_FIRST_REBALANCE_S = 3.0  # the push consumer's first rebalance reads the queues' offsets
_NO_TAG = "txmq-audit-route-only"  # a tag no message carries (``RemotingDriver._start_consumer``)


class RemotingDriver(Driver):
    """``Driver`` with the C++-core client's producers and push consumer (see the module docstring)."""

    def __init__(self, plan: Plan, settings: DriverSettings, history: History,
                 launched: Nemesis | None = None, progress: Any = None) -> None:
        super().__init__(plan, settings, history, launched, progress)
        self.client = cpp_client.load()
        self.instance = f"txmq-audit-{os.getpid()}"
        self._late_producers: dict[int, Any] = {}  # slot -> its producer for late ends
        self._members: dict[str, GroupMember] = {}  # with --group-churn: the group, by member name

    # ------------------------------------------------------------------ clients
    def _start_clients(self) -> None:
        """The consumer first: its start gives the process's client factory the topic's route, so that
        each producer's start heartbeat reaches the broker at once (a factory that knows no broker sends
        its first heartbeat at its 30 s timer, and checks find no producer until then). With members in
        processes of their own, that consumer is of a group of its own and consumes nothing."""
        if self.settings.group_churn_s is None:
            self._consumers = [self._start_consumer()]
        else:
            self._consumers = [self._start_consumer(f"{self.settings.group}-route", _NO_TAG)]
            self._start_members()
        producers = 1 + max(t.producer for t in self.plan.transactions)
        self._producers = [self._start_producer(f"p{i}") for i in range(producers)]

    def _start_members(self) -> None:
        """Every member's process now, from this thread (``GroupMember``); those that join later wait."""
        settings = MemberSettings(self.settings.endpoint, self.settings.group, self.settings.topic,
                                  self.instance, self.plan.seed, self.plan.lapse_share)
        later = [who for _, what, who in CHURN if what == "join"]
        for name in (*FIRST_MEMBERS, *later):
            self._members[name] = GroupMember(name, settings, self.history, self._acked, wait=name in later)
        for name in FIRST_MEMBERS:
            self._members[name].join()
        time.sleep(_FIRST_REBALANCE_S)

    def _acked(self, tx: str) -> None:
        with self._lock:
            self.delivered.add(tx)

    def _churn(self, started: float) -> None:
        """The membership schedule (``txmq.audit.members.CHURN``), on the workload's clock."""
        assert self.settings.group_churn_s is not None
        for share, what, who in CHURN:
            time.sleep(max(0.0, share * self.settings.group_churn_s - (time.monotonic() - started)))
            member = self._members[who]
            try:
                if what == "join":
                    member.go()
                    member.join()
                elif what == "leave":
                    member.leave()
                else:
                    member.crash()
            except BrokerUnavailableError as exc:
                self.history.add("error", what="member", member=who, error=str(exc))

    def _workload(self) -> None:
        churn = threading.Thread(target=self._churn, args=(time.monotonic(),), daemon=True)
        if self._members:
            churn.start()
        super()._workload()
        if self._members:
            churn.join()

    def run(self) -> None:
        try:
            super().run()
        finally:
            for member in self._members.values():
                member.shutdown()

    def _new_producer(self, name: str) -> Any:
        # One client factory (instance name) holds every client, and a factory refuses a second producer
        # of one group: each slot is a group of its own, whose replacement starts once it is shut down.
        slot = name.split(".")[0]
        producer = self.client.TransactionMQProducer(f"{self.settings.group}-tx-{slot}", self._checker(name))
        self._configure(producer, "Producer")
        return _Producer(producer, name, self.instance)

    def _configure(self, client: Any, kind: str) -> None:
        """Name server, and this process's instance name (the client's default would make two audits on
        one host one client to the broker), through the client's own C API."""
        client.set_namesrv_addr(self.settings.endpoint)
        getattr(self.client.dll, f"Set{kind}InstanceName")(client._handle, self.instance.encode())

    def _close_producer(self, slot: int) -> None:
        """The producer-closed fault: shut the slot's producer down, then start its replacement (the
        factory holds one producer per group)."""
        with self._lock:
            closing = self._producers[slot]
        _shutdown_quietly(closing)
        self.history.add("client", action="stop", producer=closing.name)
        replacement = self._start_producer(f"p{slot}")
        with self._lock:
            self._producers[slot] = replacement

    def _restart_endpoint(self) -> None:
        """Kill and restart the endpoint; the clients reconnect by themselves (a fresh producer could not
        join the factory beside its slot's), and the history says when they resume."""
        assert self.launched is not None
        try:
            self.launched.restart()
        except BrokerUnavailableError as exc:
            self.history.add("error", what="restart", error=str(exc))
            return
        with self._lock:
            names = [p.name for p in self._producers]
        for name in names:
            self.history.add("client", action="resume", producer=name)

    def _start_consumer(self, group: str | None = None, tag: str = "*") -> Any:
        """The audit's push consumer; of another ``group``, subscribed to a ``tag`` no message carries, a
        consumer for the route alone (``_start_clients``), whose deliveries, if any, are not the audit's."""
        consumer = self.client.PushConsumer(group or self.settings.group)
        self._configure(consumer, "PushConsumer")
        success = self.client.ConsumeStatus.CONSUME_SUCCESS
        on_message = self._on_message if group is None else (lambda _message: success)
        consumer.subscribe(self.settings.topic, on_message, expression=tag)
        consumer.set_message_batch_max_size(ONE_AT_A_TIME)
        try:
            consumer.start()
        except Exception as exc:
            raise BrokerUnavailableError(f"cannot start a consumer at {self.settings.endpoint}: "
                                         f"{' '.join(str(exc).split())}") from None
        time.sleep(_FIRST_REBALANCE_S)
        return consumer

    def _consume(self, index: int) -> None:
        """The push consumer's callbacks do the work; this thread only lives as long as consuming does."""
        while self._consuming.wait(0.5) and not self.stop.is_set():
            time.sleep(0.5)

    def _on_message(self, message: Any) -> Any:
        status = self.client.ConsumeStatus
        tx = message.body.decode(errors="replace")
        attempt = message.reconsume_times + 1
        now = self.history.now()
        self.history.add("deliver", tx=tx, attempt=attempt, message_id=message.id, consumer="c0",
                         invoked=now, returned=now, topic=message.topic, queue=message.queue_id,
                         offset=message.queue_offset)
        if self.plan.lapses(tx, attempt):
            self.history.add("lapse", tx=tx, attempt=attempt, consumer="c0")
            return status.RECONSUME_LATER
        self.history.add("ack", tx=tx, attempt=attempt, consumer="c0", invoked=now, returned=now, ok=True)
        with self._lock:
            self.delivered.add(tx)
        return status.CONSUME_SUCCESS

    # ------------------------------------------------------------------ checks
    def _checker(self, producer: str) -> Any:
        statuses = self.client.TransactionStatus

        def check(message: Any) -> Any:
            tx = message.body.decode(errors="replace")
            times = check_times(message.get_property(PROPERTY_TRANSACTION_CHECK_TIMES))
            answer = self.local.answer(tx, producer, times)
            invoked = self.history.now()
            self.local.answered(tx)
            self.history.add("end", tx=tx, action=answer, source="check", producer=producer,
                             invoked=invoked, returned=self.history.now(), ok=True)
            return getattr(statuses, answer)
        return check

    # ------------------------------------------------------------------ transactions
    def _late_producer(self, slot: int) -> Any:
        """The slot's producer for late ends, started at its first use: a late end holds its producer's
        sends until the first check (``_Producer``), so it gets a producer (and group) of its own rather
        than hold the slot's other sends back."""
        with self._lock:
            late = self._late_producers.get(slot)
        if late is None:
            late = self._start_producer(f"p{slot}-late")
            with self._lock:
                self._late_producers[slot] = late
                self._spares.append(late)  # shut down with the others at the end
        return late

    def _run_tx(self, tx: PlannedTx) -> None:
        if tx.fault in (Fault.LATE, Fault.LATE_AFTER_ROLLBACK):
            producer = self._late_producer(tx.producer)
        else:
            with self._lock:
                producer = self._producers[tx.producer]
        message = self.client.Message(self.settings.topic)
        message.set_body(tx.name)
        message.set_keys(tx.name)
        send: dict[str, Any] = {"tx": tx.name, "producer": producer.name, "invoked": self.history.now()}
        end: dict[str, Any] = {}
        try:
            result = producer.send_message_in_transaction(message, lambda _m, _a: self._local(tx, send, end))
            send["record"]["message_id"] = result.msg_id
        except Exception as exc:
            if "record" not in send:  # the half was not stored (the local transaction never ran)
                self.history.add("send", **send, returned=None, ok=False, error=str(exc)[:300])
                self.local.decide(tx.name, "ROLLBACK")  # the application saw its send fail
                return
            end = {}  # the client failed after the local transaction: its end may not have gone out
        finally:
            message.destroy()
        if end:
            self.history.add("end", **end, returned=self.history.now(), ok=True)
        if tx.fault is Fault.PRODUCER_CLOSED:
            self._close_producer(tx.producer)

    def _local(self, tx: PlannedTx, send: dict[str, Any], end: dict[str, Any]) -> Any:
        """The local transaction, called by the client once the half is stored: records the send (its
        message id once the call returns; the message the client hands over here is the one it was given,
        whose id accessors must not be called), applies the plan's outcome and fault, and returns what the
        client then sends as END_TRANSACTION."""
        send["record"] = self.history.add("send", **send, returned=self.history.now(), ok=True)
        statuses = self.client.TransactionStatus
        decision = tx.fate.decision
        if tx.fault is Fault.LATE_AFTER_ROLLBACK or tx.fault is Fault.LATE:
            self.local.wait_checked(tx.name, self.stop, self.settings.settle_s)
            time.sleep(_AFTER_ANSWER_S)
        if not tx.fate.ends_itself:
            return statuses.UNKNOWN  # unknown-then-decide and never-deciding transactions go by checks
        assert decision is not None
        self.local.decide(tx.name, decision)
        if tx.fault in (Fault.WITHHELD, Fault.PRODUCER_CLOSED):
            self.history.add("fault", tx=tx.name, fault=tx.fault.value, **(
                {"producer": send["producer"]} if tx.fault is Fault.PRODUCER_CLOSED else {}))
            return statuses.UNKNOWN
        if tx.fault in (Fault.LATE, Fault.LATE_AFTER_ROLLBACK):
            self.history.add("fault", tx=tx.name, fault=tx.fault.value)
        end.update(tx=tx.name, action=decision, source="client", producer=send["producer"],
                   invoked=self.history.now())
        return getattr(statuses, decision)


class _Producer:
    """The C++-core client's producer with the names the driver uses (``startup``, ``client_id``). Its
    transactional send is not safe from several threads at once (four threads sharing one producer crashed
    it with SIGSEGV in the local-transaction callback, measured against upstream), so sends through one
    producer go one at a time. A late end returns from its local transaction only after the first check:
    late ends go through producers of their own (``RemotingDriver._late_producer``)."""

    def __init__(self, producer: Any, name: str, instance: str) -> None:
        self.producer = producer
        self.name = name
        self.client_id = instance  # the client's id is HOST@instance: the instance is the part it sets
        self._sending = threading.Lock()

    def startup(self) -> None:
        self.producer.start()

    def shutdown(self) -> None:
        self.producer.shutdown()

    def send_message_in_transaction(self, message: Any, local: Any) -> Any:
        with self._sending:
            return self.producer.send_message_in_transaction(message, local)
