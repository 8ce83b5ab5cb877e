"""The audit's message-type probes (opt-in): delayed messages, a FIFO topic's message groups, and a message
no consumer ever acks, each driven through the official 5.x Python client and recorded in the history as
``typed`` records, so that ``txmq.audit.type_checks`` can judge ``NotBeforeDeliveryTime``,
``MessageGroupOrder`` and ``DeadLetterOnlyAtMax`` from what the clients saw.

Each probe is small and bounded: a few messages, one consumer of a group of its own, a deadline from the
endpoint's settings. They run beside each other, after the transactional workload:
- *delay*: ``DELAY_MESSAGES`` messages to a DELAY topic, delivery times a few whole seconds ahead (the
  client sends whole seconds, ``delivery_timestamp.seconds``); each delivery records the wall clock when
  its receive returned, which the endpoint's clock must have passed the message's time by (less the
  timer's precision, in rocketmq mode);
- *fifo*: ``FIFO_MESSAGES`` messages in each of ``FIFO_GROUPS`` message groups, each send waiting for the
  last (so the send order is the group's order), consumed by one consumer of an orderly group that leaves
  the first delivery of one message to lapse (and, as an application keeping the order must, every later
  message of its group in that receive), so the endpoint must hand that message out again before any later
  one of its group;
- *dlq*: one message to a NORMAL topic, received and never acked: it must come ``max_attempts`` times and
  then no more (upstream's proxy dead-letters it at the next pop: ``PopMessageResultFilterImpl``,
  ``reconsumeTimes >= maxAttempts``, where ``maxAttempts`` is the group's ``retryMaxTimes`` + 1).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from txmq.audit.history import History
from txmq.audit.producers import on_the_clients_io_loop
from txmq.errors import ConfigError

DELAY_MESSAGES, DELAY_FIRST_S = 3, 2  # delivery times 2, 3 and 4 s (whole seconds) after the send
FIFO_GROUPS, FIFO_MESSAGES = 2, 4
LAPSED = ("g0", 1)  # the FIFO delivery left to lapse on its first attempt: group g0's second message
_RECEIVE_BATCH = 16
_SLACK_S = 10  # beyond what the endpoint's settings say a probe needs


@dataclass(frozen=True)
class ProbeSettings:
    """Where each probe runs (None: not run), and the endpoint's settings the deadlines come from."""

    endpoint: str
    group: str  # the audit's consumer group: the probes' groups are named after it
    invisible_s: int
    max_attempts: int
    delay_topic: str | None = None
    fifo_topic: str | None = None
    fifo_group: str | None = None
    dlq_topic: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.delay_topic or self.fifo_topic or self.dlq_topic)


class Probes:
    """The probes of one audit, writing into its history."""

    def __init__(self, settings: ProbeSettings, history: History) -> None:
        self.settings = settings
        self.history = history
        self.config = ClientConfiguration(settings.endpoint, Credentials("", ""), request_timeout=5)

    def run(self) -> None:
        """Run the probes asked for, beside each other; a probe whose sends the endpoint refuses is a
        one-line ConfigError (a missing topic, or one of another type)."""
        s = self.settings
        runs = [(self._delay, s.delay_topic), (self._fifo, s.fifo_topic), (self._dlq, s.dlq_topic)]
        errors: list[BaseException] = []

        def guarded(probe: Any, topic: str) -> None:
            try:
                probe(topic)
            except Exception as exc:  # re-raised below, on the audit's thread
                errors.append(exc)

        threads = [threading.Thread(target=guarded, args=run, daemon=True) for run in runs if run[1]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    # ------------------------------------------------------------------ the probes
    def _delay(self, topic: str) -> None:
        consumer = self._consumer(f"{self.settings.group}-delay", topic)
        try:
            with self._producer(topic, "delay") as producer:
                first = int(time.time()) + DELAY_FIRST_S
                for i in range(DELAY_MESSAGES):
                    self._send(producer, "delay", topic, f"delay-{i}", deliver_s=first + i)
            deadline = time.monotonic() + DELAY_FIRST_S + DELAY_MESSAGES + _SLACK_S
            self._consume(consumer, "delay", deadline, lambda seen: len(seen) >= DELAY_MESSAGES)
        finally:
            consumer.shutdown()

    def _fifo(self, topic: str) -> None:
        group = self.settings.fifo_group or f"{self.settings.group}-fifo"
        consumer = self._consumer(group, topic)
        try:
            with self._producer(topic, "fifo") as producer:
                for index in range(FIFO_MESSAGES):
                    for g in range(FIFO_GROUPS):
                        self._send(producer, "fifo", topic, f"g{g}-{index}", group=f"g{g}", index=index)
            deadline = time.monotonic() + 2 * self.settings.invisible_s + _SLACK_S
            self._consume(consumer, "fifo", deadline, lambda seen: len(seen) >= FIFO_GROUPS * FIFO_MESSAGES)
        finally:
            consumer.shutdown()

    def _dlq(self, topic: str) -> None:
        consumer = self._consumer(f"{self.settings.group}-dlq", topic)
        try:
            with self._producer(topic, "dlq") as producer:
                self._send(producer, "dlq", topic, "never-acked")
            # every attempt waits out the invisible time; then one more, to see none comes after the last
            per_attempt = self.settings.invisible_s + 1
            deadline = time.monotonic() + (self.settings.max_attempts + 1) * per_attempt + _SLACK_S
            self._consume(consumer, "dlq", deadline, lambda seen: False, ack=False,
                          quiet_after=(self.settings.max_attempts, per_attempt + 2))
        finally:
            consumer.shutdown()

    # ------------------------------------------------------------------ clients
    def _consumer(self, group: str, topic: str) -> Any:
        consumer = SimpleConsumer(self.config, group, {topic: FilterExpression("*")}, await_duration=1)
        on_the_clients_io_loop()  # the probes run on threads of their own
        consumer.startup()
        return consumer

    def _producer(self, topic: str, probe: str) -> _Started:
        producer = Producer(self.config, (topic,))
        on_the_clients_io_loop()
        producer.startup()
        return _Started(producer)

    def _send(self, producer: Any, probe: str, topic: str, body: str, group: str | None = None,
              index: int | None = None, deliver_s: int | None = None) -> None:
        message = Message()
        message.topic, message.body = topic, body.encode()
        if group is not None:
            message.message_group = group
        if deliver_s is not None:
            message.delivery_timestamp = deliver_s
        try:
            with self.history.call("typed", probe=probe, what="send", body=body, message_group=group,
                                   index=index, deliver_ms=None if deliver_s is None else deliver_s * 1000):
                producer.send(message)
        except Exception as exc:
            raise ConfigError(f"the audit's {probe} probe cannot send to topic {topic} at "
                              f"{self.settings.endpoint}: {str(exc).splitlines()[0][:200]}") from None

    def _consume(self, consumer: Any, probe: str, deadline: float, done: Any, ack: bool = True,
                 quiet_after: tuple[int, float] | None = None) -> None:
        """Receive until ``done(bodies acked)``, the deadline, or (``quiet_after`` = (attempt, seconds))
        that long without a delivery once that attempt was seen; every delivery, ack and lapse recorded."""
        acked: set[str] = set()
        lapsed_once: set[tuple[str, int]] = set()
        last = (0, time.monotonic())  # the highest attempt seen, and when a delivery last came
        while time.monotonic() < deadline and not done(acked):
            if quiet_after and last[0] >= quiet_after[0] and time.monotonic() - last[1] > quiet_after[1]:
                break
            invoked = self.history.now()
            try:
                messages = consumer.receive(_RECEIVE_BATCH, self.settings.invisible_s)
            except Exception as exc:
                self.history.add("error", what=f"{probe} receive", error=str(exc).splitlines()[0][:300])
                time.sleep(0.2)
                continue
            returned, wall = self.history.now(), time.time()
            held: set[str] = set()  # message groups of this receive whose order a lapse interrupted
            for position, message in enumerate(messages):
                body, attempt = message.body.decode(errors="replace"), message.delivery_attempt
                group = message.message_group
                self.history.add("typed", probe=probe, what="deliver", body=body, attempt=attempt,
                                 message_group=group, invoked=invoked, returned=returned,
                                 wall_returned_ms=int(wall * 1000), batch=invoked, position=position)
                last = (max(last[0], attempt), time.monotonic())
                key = (group or "", int(body.rsplit("-", 1)[-1]) if probe == "fifo" else -1)
                if not ack or group in held or (probe == "fifo" and key == LAPSED and key not in lapsed_once):
                    lapsed_once.add(key)
                    held |= {group} if group else set()
                    self.history.add("typed", probe=probe, what="lapse", body=body, attempt=attempt)
                    continue
                try:
                    with self.history.call("typed", probe=probe, what="ack", body=body, attempt=attempt):
                        consumer.ack(message)
                except Exception:  # recorded as failed: the message comes again
                    continue
                acked.add(body)
        self.history.add("typed", probe=probe, what="end")


class _Started:
    """A started producer, shut down on leaving the block."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer

    def __enter__(self) -> Any:
        return self.producer

    def __exit__(self, *exc: object) -> None:
        try:
            self.producer.shutdown()
        except Exception:  # the probe's records are what matter; a failed shutdown changes none
            pass
