"""``txmq atlas --endpoint HOST:PORT``: the entries a client can bring about, run against any 5.x endpoint
(txmq serve, an upstream proxy) as small targeted audits.

Each reachable entry names the audit's client-side fault that reproduces it (``Entry.outside``): a plan of
a few committing transactions all given that fault is driven through the official client by the audit's
driver (``txmq.audit.driver``), and the history is judged by the audit's checkers. The entry is
*reproduced* when a finding carries its catalogue name, *not reproduced* otherwise (fixed, or the
endpoint keeps it absent, as strict mode does); the other entries are *unreachable* from outside.

The entry that needs no fault (``op-late-when-checked``) is a race of the endpoint's own: its plan is
``UNFAULTED_TRANSACTIONS`` transactions committing at once, 10 a second, and only a finding on one checked
after its own COMMIT shows it. Upstream's broker from the kit (checks every 2 s, transaction timeout 3 s)
checked 47 of 400 such transactions after their commit over 40 s, ``txmq serve --mode rocketmq`` 30 of
400 (docs/audit.md); a 4 s burst of 40 checked 0 to 2 (the race fires in a few Op batch cycles only). A
run that misses it says *not seen*, not *not reproduced*: a race missed is no evidence of a fix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from txmq.atlas.entry import Entry
from txmq.audit.checkers import Expectations, run_checks, transactions
from txmq.audit.history import History, Record
from txmq.audit.nemesis import wait_reachable
from txmq.audit.sightings import checked_after_own_end
from txmq.audit.workload import Fate, Fault, Plan, PlannedTx
from txmq.errors import INSTALL_SERVE, ToolMissingError

REPRODUCED, NOT_REPRODUCED, UNREACHABLE = "reproduced", "not reproduced", "unreachable"
NOT_SEEN = "not seen"  # a race of the endpoint's that this run missed: no evidence that it is fixed
TRANSACTIONS = 3  # per entry: the late ones race the consumer's last receive, so more than one
UNFAULTED_TRANSACTIONS = 40  # for the entry a race of the endpoint's brings about (the module docstring)
REACH_TIMEOUT_S = 5


@dataclass(frozen=True)
class Target:
    """The endpoint and what the audit needs to know of it."""

    endpoint: str
    topic: str
    group: str
    transaction_timeout_s: float
    check_interval_s: float
    check_max: int
    settle_s: float


def plan_for(entry: Entry, seed: int) -> Plan:
    """``TRANSACTIONS`` committing transactions of one producer, each with the entry's fault, 0.2 s apart;
    with no fault, ``UNFAULTED_TRANSACTIONS`` of them 0.1 s apart."""
    fault = Fault(entry.outside)
    count, gap = (UNFAULTED_TRANSACTIONS, 0.1) if fault is Fault.NONE else (TRANSACTIONS, 0.2)
    txs = tuple(PlannedTx(f"atlas-{entry.key}-{seed}-{n}", round(gap * n, 6), 0, Fate.COMMIT, fault)
                for n in range(count))
    return Plan(seed, txs, (), 0.0)


def history_of(entry: Entry, target: Target, seed: int) -> list[Record]:
    """Drive the entry's plan against the endpoint; the history recorded."""
    try:
        from txmq.audit.driver import Driver, DriverSettings  # the official client: txmq[serve]
    except ImportError as exc:
        raise ToolMissingError(f"txmq atlas --endpoint needs the official client ({exc.name}): "
                               f"{INSTALL_SERVE}") from None

    recorder = History()
    settings = DriverSettings(target.endpoint, target.topic, target.group, consumers=1, invisible_s=5,
                              settle_s=target.settle_s, check_max=target.check_max,
                              check_interval_s=target.check_interval_s)
    Driver(plan_for(entry, seed), settings, recorder).run()
    return recorder.records


def _checked(records: list[Record]) -> set[str]:
    return {str(r["tx"]) for r in records if r["ev"] == "check"}


def verdict(entry: Entry, records: list[Record], target: Target) -> tuple[str, list[str]]:
    """Reproduced or not, with the findings under the entry's catalogue name. A duplicated end counts only
    on a transaction that was never checked: a check's COMMIT answer duplicates a message by itself when
    it reaches a half whose Op record was not yet written (S30), which is another entry, the one with no
    fault: it counts only on a transaction checked after its own end returned."""
    expectations = Expectations("rocketmq", target.transaction_timeout_s, target.check_max,
                                check_interval_s=target.check_interval_s)
    fault = Fault(entry.outside)
    if fault is Fault.DUPLICATED:
        excused = _checked(records)
    elif fault is Fault.NONE:
        excused = {name for name, tx in transactions(records).items()
                   if not checked_after_own_end(tx.ends, tx.checks)}
    else:
        excused = set()
    findings = run_checks(records, expectations)
    mine = [f"{f.tx}: {f.detail}" for f in findings if f.invariant == entry.catalogue and f.tx not in excused]
    return (REPRODUCED if mine else NOT_SEEN if fault is Fault.NONE else NOT_REPRODUCED), mine


def run_against(entries: list[Entry], target: Target, seed: int,
                progress: Callable[[str], None] = lambda line: None) -> list[tuple[Entry, str, list[str]]]:
    """Each entry's verdict against the endpoint (unreachable ones are not run)."""
    wait_reachable(target.endpoint, REACH_TIMEOUT_S)
    results: list[tuple[Entry, str, list[str]]] = []
    for entry in entries:
        if not entry.outside:
            results.append((entry, UNREACHABLE, []))
            continue
        count = len(plan_for(entry, seed).transactions)
        progress(f"{entry.key}: {count} transactions with the client fault {entry.outside}")
        shown, lines = verdict(entry, history_of(entry, target, seed), target)
        results.append((entry, shown, lines))
    return results
