"""The lite pull consumer (txmq.client.lite_pull), as upstream's DefaultLitePullConsumerImpl: a poll counts
its batch consumed at once, a later poll's auto-commit moves the count into the offset store, the store
reaches the broker at its interval, and shutdown persists only what was committed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq.broker.facade import Broker
from txmq.client.lite_pull import LitePullConsumer, LitePullSettings
from txmq.client.membership import GroupDirectory
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import ClientError
from txmq.protocol import Message, MessageExt
from txmq.store.memory import memory_opener


class Lite:
    """One broker with topic T of two queues, and lite pull members of group G."""

    def __init__(self, tmp: Path, **settings: object) -> None:
        self.clock = ManualClock(1_000)
        self.broker = Broker(tmp / "store", BrokerConfig(), self.clock, open_store=memory_opener())
        self.directory = GroupDirectory({"T": 2})
        self.settings = LitePullSettings(consume_from_first=True, **settings)  # type: ignore[arg-type]
        self.sent = 0

    def member(self, name: str) -> LitePullConsumer:
        return LitePullConsumer(self.broker, self.directory, "G", name, ["T"], self.clock,
                                self.settings).start()

    def send(self, count: int) -> None:
        for _ in range(count):
            self.broker.send_message(Message("T", b"x", queue_id=self.sent % 2), f"m{self.sent}")
            self.sent += 1

    def committed(self) -> list[int | None]:
        return [self.broker.consumer_offset("G", "T", q) for q in range(2)]


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Lite]:
    made = Lite(tmp_path)
    yield made
    made.broker.close()


def ids(batch: list[MessageExt]) -> list[str]:
    return [m.transaction_id or "" for m in batch]


def test_a_poll_takes_one_batch_of_one_queue_in_turn(lite: Lite) -> None:
    a = lite.member("a")
    lite.send(30)  # 15 a queue
    assert ids(a.poll()) == [f"m{i}" for i in range(0, 20, 2)]  # pullBatchSize 10, queue 0
    assert ids(a.poll()) == [f"m{i}" for i in range(1, 21, 2)]  # then queue 1
    assert ids(a.poll()) == [f"m{i}" for i in range(20, 30, 2)]
    assert len(a.poll()) == 5 and a.poll() == []
    assert a.consumed == {("T", 0): 15, ("T", 1): 15}


def test_a_batch_is_committed_by_a_later_poll_and_reaches_the_broker_at_the_persist(lite: Lite) -> None:
    a = lite.member("a")
    lite.send(4)
    assert len(a.poll()) == 2  # the first poll's auto-commit came before it: nothing to commit
    lite.clock.advance(5_000)
    a.tick()  # persistConsumerOffset's turn: the store holds nothing yet
    assert lite.committed() == [None, None]
    a.poll()  # maybeAutoCommit: queue 0's count goes to the store, then queue 1's batch
    lite.clock.advance(5_000)
    a.tick()
    assert lite.committed() == [2, None]


def test_shutdown_persists_only_what_was_committed_so_the_next_owner_polls_again(lite: Lite) -> None:
    # DefaultLitePullConsumerImpl.shutdown calls persistConsumerOffset, not commitAll.
    a = lite.member("a")
    lite.send(4)
    assert len(a.poll()) + len(a.poll()) == 4
    a.shutdown()
    assert lite.committed() == [None, None] and a.consumed == {}  # nothing left for a restart to commit
    b = lite.member("b")
    assert sorted(ids(b.poll()) + ids(b.poll())) == ["m0", "m1", "m2", "m3"]


def test_commit_all_before_shutdown_leaves_nothing_to_poll_again(lite: Lite) -> None:
    a = lite.member("a")
    lite.send(4)
    a.poll(), a.poll()
    a.commit_all()
    a.shutdown()
    assert lite.committed() == [2, 2]
    assert lite.member("b").poll() == []


def test_a_queue_that_moves_before_the_commit_is_polled_again_by_its_new_owner(lite: Lite) -> None:
    a = lite.member("a")
    lite.send(4)
    a.poll(), a.poll()  # both queues polled, nothing committed
    b = lite.member("b")  # joins: the broker tells a, whose next tick rebalances
    a.tick()
    assert sorted(a.owned) == [("T", 0)] and sorted(b.owned) == [("T", 1)]
    assert a.consumed == {("T", 0): 2}  # queue 1's count left with the queue
    assert ids(b.poll()) == ["m1", "m3"]  # consumed again: the move came before any commit


def test_without_auto_commit_only_commit_all_commits(tmp_path: Path) -> None:
    lite = Lite(tmp_path, auto_commit=False)
    a = lite.member("a")
    lite.send(2)
    a.poll(), a.poll()
    lite.clock.advance(10_000)
    a.poll()
    a.tick()
    assert lite.committed() == [None, None]
    a.commit_all()
    lite.clock.advance(5_000)
    a.tick()
    assert lite.committed() == [1, 1]
    lite.broker.close()


def test_a_crash_loses_the_polled_counts_and_polling_needs_a_running_member(lite: Lite) -> None:
    a = lite.member("a")
    lite.send(2)
    a.poll()
    a.crash()
    assert a.consumed == {}
    with pytest.raises(ClientError, match="not running"):
        a.poll()
    with pytest.raises(ClientError, match="auto_commit_interval_ms"):
        LitePullSettings(auto_commit_interval_ms=0)
    assert LitePullSettings().pull_batch_size == 10  # DefaultLitePullConsumer.pullBatchSize
