"""Consumer groups in the client API (txmq.client.group): allocation as upstream's strategies, rebalance
on join/leave/crash, asynchronous offset commits, retry and DLQ, broadcasting with local offsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq.broker.facade import Broker
from txmq.client.allocate import averagely, by_circle
from txmq.client.group import ConsumeStatus, GroupConsumer
from txmq.client.member import GroupSettings
from txmq.client.membership import GroupDirectory, dlq_topic, retry_topic
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import ClientError
from txmq.protocol import Message, MessageExt
from txmq.store.memory import memory_opener

OK, LATER = ConsumeStatus.CONSUME_SUCCESS, ConsumeStatus.RECONSUME_LATER


@pytest.mark.parametrize(("queues", "members", "expected"), [
    # AllocateMessageQueueAveragely: blocks, the first len % n members take one more.
    (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
    (5, 2, [[0, 1, 2], [3, 4]]),
    (2, 3, [[0], [1], []]),
    (4, 4, [[0], [1], [2], [3]]),
])
def test_averagely_splits_as_upstream(queues: int, members: int, expected: list[list[int]]) -> None:
    ids = [f"c{i}" for i in range(members)]
    assert [averagely(m, list(range(queues)), ids) for m in ids] == expected


def test_by_circle_deals_queues_round_robin_and_outsiders_get_nothing() -> None:
    ids = ["a", "b", "c"]
    assert [by_circle(m, list(range(8)), ids) for m in ids] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert by_circle("z", [0, 1], ids) == [] and averagely("z", [0, 1], ids) == []


class Group:
    """One broker, one group directory, members recording what they consumed."""

    def __init__(self, tmp: Path, queues: int = 4, **settings: object) -> None:
        self.clock = ManualClock(1_000)
        self.broker = Broker(tmp / "store", BrokerConfig(), self.clock, open_store=memory_opener())
        self.directory = GroupDirectory({"T": queues})
        self.settings = GroupSettings(consume_from_first=True, **settings)  # type: ignore[arg-type]
        self.consumed: list[tuple[str, str, int]] = []  # (member, message id, reconsume count)
        self.fail: set[str] = set()
        self.members: dict[str, GroupConsumer] = {}
        self.sent = 0

    def member(self, name: str, offsets_dir: Path | None = None) -> GroupConsumer:
        def listen(message: MessageExt) -> ConsumeStatus:
            self.consumed.append((name, message.transaction_id or "", int(message.properties.get(
                "RECONSUME_TIME", "0"))))
            return LATER if message.transaction_id in self.fail else OK
        consumer = GroupConsumer(self.broker, self.directory, "G", name, ["T"], listen, self.clock,
                                 self.settings, offsets_dir=offsets_dir)
        self.members[name] = consumer.start()
        return consumer

    def send(self, count: int) -> None:
        for _ in range(count):
            self.broker.send_message(Message("T", b"x", queue_id=self.sent % 4), f"m{self.sent}")
            self.sent += 1

    def run(self, ms: int, step: int = 100) -> None:
        for _ in range(ms // step):
            self.clock.advance(step)
            for member in list(self.members.values()):
                member.tick()

    def ids(self) -> list[str]:
        return [mid for _, mid, _ in self.consumed]


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    made = Group(tmp_path)
    yield made
    made.broker.close()


def test_members_split_the_queues_and_consume_each_message_once(group: Group) -> None:
    a, b = group.member("a"), group.member("b")
    group.run(100)
    assert sorted(a.owned) == [(retry_topic("G"), 0), ("T", 0), ("T", 1)]
    assert sorted(b.owned) == [("T", 2), ("T", 3)]
    group.send(40)
    group.run(6_000)
    assert sorted(group.ids()) == sorted(f"m{i}" for i in range(40))
    # persistConsumerOffsetInterval: by now every queue's offset reached the broker.
    assert [group.broker.consumer_offset("G", "T", q) for q in range(4)] == [10, 10, 10, 10]


def test_offsets_reach_the_broker_only_at_the_interval_and_at_shutdown(group: Group) -> None:
    a = group.member("a")
    group.run(5_000)  # the first persist: nothing consumed yet
    group.send(4)
    group.run(1_000)
    assert len(group.consumed) == 4 and group.broker.consumer_offset("G", "T", 0) is None
    a.shutdown()
    assert [group.broker.consumer_offset("G", "T", q) for q in range(4)] == [1, 1, 1, 1]


def test_a_crash_before_the_commit_makes_the_new_owner_consume_again(group: Group) -> None:
    a, _ = group.member("a"), group.member("b")
    group.run(5_000)
    group.send(8)
    group.run(1_000)  # consumed, not yet committed
    a.crash()
    group.members.pop("a")
    group.run(1_000)  # b is told at once and takes a's queues from the last committed offset
    assert sorted(group.ids()) == sorted([f"m{i}" for i in range(8)] + ["m0", "m1", "m4", "m5"])


def test_a_clean_leave_commits_first_so_the_new_owner_consumes_nothing_again(group: Group) -> None:
    a, _ = group.member("a"), group.member("b")
    group.run(5_000)
    group.send(8)
    group.run(1_000)
    a.shutdown()
    group.members.pop("a")
    group.run(1_000)
    assert sorted(group.ids()) == sorted(f"m{i}" for i in range(8))


def test_a_join_moves_queues_without_waiting_for_the_old_owners_commit(group: Group) -> None:
    group.member("a")
    group.send(8)
    group.run(1_000)
    group.member("b")  # b takes queues 2 and 3 from the broker's offsets: none committed yet
    group.run(1_000)
    assert sorted(group.ids()) == sorted([f"m{i}" for i in range(8)] + ["m2", "m3", "m6", "m7"])


def test_a_failing_message_is_retried_with_delays_then_goes_to_the_dlq(tmp_path: Path) -> None:
    group = Group(tmp_path, max_reconsume_times=2)
    group.member("a")
    group.fail.add("m0")
    group.send(1)
    group.run(100)
    assert group.consumed == [("a", "m0", 0)]
    group.run(4_000)  # the first retry waits level 3 (10 s): not yet
    assert len(group.consumed) == 1
    group.run(7_000)
    assert group.consumed[-1] == ("a", "m0", 1)
    group.run(30_000)  # level 4: 30 s more
    assert group.consumed[-1] == ("a", "m0", 2) and len(group.consumed) == 3
    dead = group.broker.pull("x", dlq_topic("G"), 0, 0)
    assert [(m.transaction_id, m.properties["RECONSUME_TIME"]) for m in dead] == [("m0", "3")]
    group.broker.close()


def test_broadcasting_members_each_read_everything_and_keep_offsets_locally(tmp_path: Path) -> None:
    group = Group(tmp_path, broadcasting=True)
    a = group.member("a", tmp_path / "offsets")
    group.member("b", tmp_path / "offsets")
    group.send(4)
    group.run(6_000)
    assert sorted(group.consumed) == sorted((m, f"m{i}", 0) for m in "ab" for i in range(4))
    assert group.broker.consumer_offset("G", "T", 0) is None
    a.crash()
    again = GroupConsumer(group.broker, group.directory, "G", "a", ["T"], lambda m: OK, group.clock,
                          group.settings, offsets_dir=tmp_path / "offsets").start()
    again.tick()
    assert again.owned[("T", 0)].next_offset == 1  # resumed from its own file
    group.broker.close()


def test_bad_settings_and_members_get_one_line_errors(group: Group) -> None:
    with pytest.raises(ClientError, match="unknown allocation strategy"):
        GroupSettings(strategy="random")
    with pytest.raises(ClientError, match="offsets_dir"):
        GroupConsumer(group.broker, group.directory, "G", "a", ["T"], lambda m: OK, group.clock,
                      GroupSettings(broadcasting=True))
    with pytest.raises(ClientError, match="at least one topic"):
        GroupConsumer(group.broker, group.directory, "G", "a", [], lambda m: OK, group.clock)
