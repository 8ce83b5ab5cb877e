"""Broker throughput through the public API against a raw-append ceiling measured in the same run.

    python -m benchmarks.broker [--transactions N] [--seed S]

Prints transactions/s of ``TransactionProducer.send_message_in_transaction`` (commit) on a file-backed
store, the raw ceiling (a tight loop appending the same three records per transaction straight to the
store: half, real message, and a 1/585 share of an Op record), their ratio, halves per Op record at
saturation and at low load, and the half-cache hit ratio. Targets: ratio >= 0.25, >= 400 halves per Op
record at saturation.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message
from txmq.store.message import TRANSACTION_COMMIT, StoredMessage
from txmq.store.message_store import MessageStore
from txmq.transaction.constants import HALF_TOPIC, OP_TOPIC


class _CommitAll:
    def execute_local_transaction(self, message: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def through_api(n: int, gap_ms: int) -> tuple[float, dict[str, int]]:
    """Seconds for ``n`` committed transactions ``gap_ms`` apart, and the broker's counters."""
    clock = ManualClock(1_000_000)
    with tempfile.TemporaryDirectory(prefix="txmq-bench-") as directory:
        broker = Broker(directory, BrokerConfig(), clock)
        producer = TransactionProducer(broker, "bench", _CommitAll(), "bench-0").start()
        body = b"x" * 100
        started = time.perf_counter()
        for i in range(n):
            producer.send_message_in_transaction(Message("T", body, queue_id=i % 4))
            if gap_ms:
                clock.advance(gap_ms)
            if clock.now_ms() >= broker.next_due_ms():
                broker.tick()
        elapsed = time.perf_counter() - started
        broker.flush_op_batches(force=True)
        stats = broker.broker_stats()
        broker.close()
    return elapsed, stats


def raw_ceiling(n: int) -> float:
    """Seconds to append the same records straight to the store: the cost floor of the data path."""
    props = {"TRAN_MSG": "true", "PGROUP": "bench", "UNIQ_KEY": "bench-0-1", "REAL_TOPIC": "T",
             "REAL_QID": "0", "__transactionId__": "bench-0-1", "CLUSTER": "txmq"}
    op_body = b"1234567," * 585
    with tempfile.TemporaryDirectory(prefix="txmq-bench-") as directory:
        store = MessageStore.open(directory, clock=lambda: 1_000_000)
        body = b"x" * 100
        started = time.perf_counter()
        for i in range(n):
            store.put_message(StoredMessage(HALF_TOPIC, 0, body, dict(props), 1_000_000))
            store.put_message(StoredMessage("T", i % 4, body, dict(props), 1_000_000,
                                            sysflag=TRANSACTION_COMMIT, prepared_transaction_offset=i))
            if i % 585 == 0:
                store.put_message(StoredMessage(OP_TOPIC, 0, op_body, {"TAGS": "d"}, 1_000_000))
        elapsed = time.perf_counter() - started
        store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--low-load-transactions", type=int, default=5_000)
    args = parser.parse_args()
    n = args.transactions
    raw = raw_ceiling(n)
    api, stats = through_api(n, gap_ms=0)
    _, low = through_api(args.low_load_transactions, gap_ms=100)
    hit_lookups = stats["half_cache_hits"] + stats["half_cache_misses"]
    print(f"transactions: {n:,}")
    print(f"raw append ceiling:  {n / raw:12,.0f} tx/s  ({raw:.2f} s)")
    print(f"through the API:     {n / api:12,.0f} tx/s  ({api:.2f} s)")
    print(f"ratio API / ceiling: {raw / api:12.3f}   (target >= 0.25)")
    per_op = stats["op_entries"] / stats["op_records"]
    print(f"halves per Op record at saturation: {per_op:.1f}  (target >= 400)")
    print(f"halves per Op record at low load (1 tx / 100 ms): {low['op_entries'] / low['op_records']:.1f}")
    print(f"half-cache hit ratio: {stats['half_cache_hits'] / hit_lookups:.3f}")


if __name__ == "__main__":
    main()
