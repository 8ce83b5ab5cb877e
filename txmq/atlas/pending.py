"""Candidates of issue #27 not (yet) in the atlas, as data: why each has no scenario. ``docs/atlas.md``
lists them after the entries, so that a reader asking about one of these numbers gets an answer too."""

from __future__ import annotations

from dataclasses import dataclass

HA = "HA (slave acting master, escape, switch-over): out of scope for a single broker"
PROXY = "lives in the proxy's memory or its remoting activity, which the in-process broker does not have"
NOT_YET = "not yet: no scenario written"


@dataclass(frozen=True)
class Pending:
    """``numbers``: apache/rocketmq issues or pull requests; ``what``: the reported behaviour as issue #27
    summarises it; ``why``: why the atlas has no scenario for it."""

    numbers: tuple[int, ...]
    what: str
    why: str


PENDING: tuple[Pending, ...] = (
    Pending((10989,), "escape retries sleep 100L * (2 ^ n), an XOR, not a power (still at HEAD's "
            "TransactionalMessageServiceImpl.check)", HA),
    Pending((5012, 7709, 9804), "commits and checks across a master/slave switch", HA),
    Pending((9431,), "transaction data kept in one proxy's memory: a commit through another proxy fails",
            PROXY),
    Pending((10797,), "the remoting TransactionActivity ignores endTransaction's result", PROXY),
    Pending((8313, 8316), "candidates of issue #27 listed under the proxy, not yet read", PROXY),
    Pending((4638,), "at most 15 transaction entries per id (transactionDataMaxNum); txmq serve keeps it",
            PROXY),
    Pending((10260,), "the gRPC path rejects delayed transactional messages", PROXY),
    Pending((9488, 9500), "an exception aborts a run without saving checkpoints (S39, "
            "tests/testdata/transcripts/s39_exception_aborts_the_run.txt, which needs a real write "
            "failure on disk)", NOT_YET),
    Pending((9322,), "a 60 s run limit against a 30 s interval (S38)", NOT_YET),
    Pending((11126,), "a null pull result aborts the whole cycle", NOT_YET),
    Pending((1694,), "checks dropped when the producer's channel is not writable, yet counted",
            NOT_YET + "; from the trace it is a SENT check, so DiscardedUnchecked cannot see it"),
    Pending((2133,), "deleting a topic deleted the Op queue: a check flood", NOT_YET),
    Pending((7240,), "batched Op records: an Op offset is done only when every half it lists was reached "
            "(S37 covers the rule)", NOT_YET),
    Pending((549, 1568, 9923, 9486), "candidates of issue #27 not yet read against HEAD", NOT_YET),
    Pending((2098,), "with transientStorePoolEnable an END_TRANSACTION right after the send fails its "
            "lookup (S34)", "txmq's halves are readable at once: it cannot show this"),
)
