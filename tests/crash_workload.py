"""A seeded transactional workload on a file-backed broker, meant to be killed with SIGKILL at any moment.

Run as ``python tests/crash_workload.py DIR LOG SEED MODE FLUSH ROUND``. It appends to ``LOG`` what the
killing test needs to judge the store afterwards, each line written (to the OS) before the step it
announces can have an effect:

* ``D <txn> <COMMIT|ROLLBACK>`` — the local transaction's decision, before END_TRANSACTION is sent;
* ``A <txn>`` — the broker acknowledged a COMMIT (``end_transaction`` returned OK).

Checks are answered from the decisions (earlier rounds' too); a half with no decision is one whose
process died before its local transaction ran, so its check answer is ROLLBACK.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message, MessageExt, SendResult
from txmq.trace import schema as ev

STEPS = 20_000
MAX_STEP_MS = 400
ROUND_SPAN_MS = 20_000_000  # > STEPS * MAX_STEP_MS; five rounds stay well inside the 72 h retention
START_MS = 1_000_000_000
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE


def round_start_ms(round_no: int) -> int:
    """Where the manual clock of a round starts (rounds never overlap in time)."""
    return START_MS + round_no * ROUND_SPAN_MS


def read_log(path: Path) -> tuple[dict[str, LocalTransactionState], set[str]]:
    """Decisions and acknowledged commits recorded so far (a torn last line is ignored)."""
    decisions: dict[str, LocalTransactionState] = {}
    acknowledged: set[str] = set()
    if not path.exists():
        return decisions, acknowledged
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "D" and parts[2] in ("COMMIT", "ROLLBACK"):
            decisions[parts[1]] = LocalTransactionState[f"{parts[2]}_MESSAGE"]
        elif len(parts) == 2 and parts[0] == "A":
            acknowledged.add(parts[1])
    return decisions, acknowledged


class DecisionListener:
    """Answers checks from the decisions; no decision means the local transaction never ran."""

    def __init__(self, decisions: dict[str, LocalTransactionState]) -> None:
        self.decisions = decisions

    def execute_local_transaction(self, message: Message, arg: object) -> LocalTransactionState:
        """Not called: the workload sends halves and ends them itself, to log each step in between."""
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return self.decisions.get(message.transaction_id or "", ROLLBACK)


class AckTransport:
    """END_TRANSACTION straight to the broker, keeping its answer (a one-way client never sees it)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.last: str | None = None

    def __call__(self, request: EndTransactionRequest) -> None:
        self.last = self.broker.end_transaction(request).name


def main(argv: list[str]) -> int:
    directory, log_path, seed, mode, flush, round_no = argv
    rng = random.Random(f"{seed}/{round_no}")
    decisions, _ = read_log(Path(log_path))
    clock = ManualClock(round_start_ms(int(round_no)))
    broker = Broker(directory, BrokerConfig(mode=mode, flush=flush), clock)
    transport = AckTransport(broker)
    producer = TransactionProducer(broker, "G", DecisionListener(decisions), producer_id=f"r{round_no}",
                                   transport=transport).start()
    decided: list[SendResult] = []

    def end(result: SendResult) -> None:
        state = decisions[result.msg_id]
        producer.end_transaction(result, state)
        if transport.last == ev.OK and state is COMMIT:
            log.write(f"A {result.msg_id}\n")

    print("ready", flush=True)
    with open(log_path, "a", buffering=1) as log:
        for _ in range(STEPS):
            clock.advance(rng.randint(1, MAX_STEP_MS))
            broker.tick()
            roll = rng.random()
            if roll < 0.7:
                message = Message("T", rng.randbytes(rng.randint(1, 64)), queue_id=rng.randint(0, 2))
                result = producer.send_half(message)
                decisions[result.msg_id] = COMMIT if rng.random() < 0.6 else ROLLBACK
                log.write(f"D {result.msg_id} {decisions[result.msg_id].action}\n")
                decided.append(result)
                if rng.random() < 0.8:  # else: left UNKNOW, resolved by a check
                    end(result)
            elif roll < 0.8 and decided:  # a duplicate END_TRANSACTION of an earlier transaction
                end(rng.choice(decided))
    broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
