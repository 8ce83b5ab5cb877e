"""Queue allocation strategies of a consumer group, as upstream's ``AllocateMessageQueueStrategy``.

Every member computes its own share from the same two sorted lists (the topic's queues and the group's
member ids), so members agree without talking to each other, as long as they see the same lists: while a
join or leave is still being learned, two members can both hold a queue, or neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Q = TypeVar("Q")


def averagely(member: str, queues: Sequence[Q], members: Sequence[str]) -> list[Q]:
    """``AllocateMessageQueueAveragely.allocate``: contiguous blocks; the first ``len(queues) % n``
    members take one queue more. A member not in ``members`` gets nothing (upstream's ``check``)."""
    if member not in members or not queues:
        return []
    index, n = members.index(member), len(members)
    mod = len(queues) % n
    if len(queues) <= n:
        size = 1
    else:
        size = len(queues) // n + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    return list(queues[start:start + max(0, min(size, len(queues) - start))])


def by_circle(member: str, queues: Sequence[Q], members: Sequence[str]) -> list[Q]:
    """``AllocateMessageQueueAveragelyByCircle.allocate``: queue i goes to member ``i % n``."""
    if member not in members:
        return []
    index, n = members.index(member), len(members)
    return [queue for i, queue in enumerate(queues) if i >= index and i % n == index]


# Any: a strategy allocates whatever queue objects it is given, and returns some of them.
STRATEGIES: dict[str, Callable[[str, Sequence[Any], Sequence[str]], list[Any]]] = {
    "averagely": averagely, "by_circle": by_circle}
