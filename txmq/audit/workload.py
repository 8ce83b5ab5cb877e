"""The audit's seeded plan: which transactions run when, how their local transactions end, which
client-side fault each suffers, which deliveries a consumer lets lapse, and when the nemesis strikes.

Everything random is drawn here, from one seed, before anything runs: the same seed gives the same plan
byte for byte (``Plan.describe``). What the endpoint then does with it (timings, which check arrives when)
is the history's business, not the plan's.
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass

from txmq.errors import ConfigError


class Fate(enum.Enum):
    """How a transaction's local transaction ends."""

    COMMIT = "commit"  # decides COMMIT at once
    ROLLBACK = "rollback"  # decides ROLLBACK at once
    UNKNOWN_COMMIT = "unknown-then-commit"  # answers its first check UNKNOWN, then decides COMMIT
    UNKNOWN_ROLLBACK = "unknown-then-rollback"  # answers its first check UNKNOWN, then decides ROLLBACK
    NEVER = "never"  # never decides: every check is answered UNKNOWN

    @property
    def decision(self) -> str | None:
        """The decision the local transaction reaches (None: never)."""
        if self in (Fate.COMMIT, Fate.UNKNOWN_COMMIT):
            return "COMMIT"
        if self in (Fate.ROLLBACK, Fate.UNKNOWN_ROLLBACK):
            return "ROLLBACK"
        return None

    @property
    def ends_itself(self) -> bool:
        """Whether the producer sends its own end-transaction (decided at once) or leaves it to checks."""
        return self in (Fate.COMMIT, Fate.ROLLBACK)


class Fault(enum.Enum):
    """A client-side fault on one transaction that ends itself."""

    NONE = "none"
    WITHHELD = "withheld"  # the end-transaction is never sent: the endpoint must check
    DUPLICATED = "duplicated"  # the end-transaction is sent twice
    LATE = "late"  # the end-transaction is sent after the first check was answered with the decision
    # the local transaction commits only after its first check found nothing and answered ROLLBACK (an
    # application that reads "no record" as "rolled back"); the COMMIT is then sent late
    LATE_AFTER_ROLLBACK = "late-after-rollback"
    PRODUCER_CLOSED = "producer-closed"  # the producer closes after the send; another of its group remains


FAULT_LEVELS = ("none", "light", "heavy")
# Share of self-ending transactions given a fault, and number of nemesis kills, per --faults level.
_FAULT_SHARE = {"none": 0.0, "light": 0.15, "heavy": 0.45}
_KILLS = {"none": 0, "light": 1, "heavy": 2}
# Share of first deliveries a consumer lets the invisible time lapse on, per level.
_LAPSE_SHARE = {"none": 0.0, "light": 0.05, "heavy": 0.15}
_FATE_WEIGHTS = ((Fate.COMMIT, 50), (Fate.ROLLBACK, 20), (Fate.UNKNOWN_COMMIT, 12),
                    (Fate.UNKNOWN_ROLLBACK, 8), (Fate.NEVER, 10))


@dataclass(frozen=True)
class PlannedTx:
    """One transaction of the plan; ``name`` is also its message body."""

    name: str
    at_s: float  # when it starts, from the workload's start
    producer: int  # index of the producer slot that sends it
    fate: Fate
    fault: Fault
    unknowns: int = 1  # an unknown-then-deciding one: the checks it answers UNKNOWN before it decides


@dataclass(frozen=True)
class BenchmarkMix:
    """The mix of fates of upstream's benchmark ``TransactionProducer`` (``-sr``, ``-su``, ``-cu``), which the
    #1694 and #9640 reports ran: each message's local transaction rolls back with ``send_rollback``, else
    stays unknown with ``send_unknown``, else commits (``buildMessage`` draws them in that order); each
    check of an unknown one answers UNKNOWN with ``check_unknown``, else COMMIT
    (``TransactionListenerImpl.checkLocalTransaction`` replays answers drawn at send time)."""

    send_rollback: float
    send_unknown: float
    check_unknown: float

    @classmethod
    def parse(cls, text: str) -> BenchmarkMix:
        """``--benchmark-mix SR,SU,CU`` -> the mix; ConfigError unless three shares in [0, 1) (CU < 1:
        a transaction must decide at some check)."""
        try:
            shares = [float(part) for part in text.split(",")]
        except ValueError:
            shares = []
        if len(shares) != 3 or not all(0 <= v < 1 for v in shares):
            raise ConfigError(f"--benchmark-mix {text}: three shares SR,SU,CU, each at least 0 and below 1")
        return cls(*shares)

    def draw(self, rng: random.Random) -> tuple[Fate, int]:
        """One transaction's fate, and the checks it answers UNKNOWN first (for an unknown one)."""
        if rng.random() < self.send_rollback:
            return Fate.ROLLBACK, 1
        if rng.random() < self.send_unknown:
            unknowns = 0
            while rng.random() < self.check_unknown:
                unknowns += 1
            return Fate.UNKNOWN_COMMIT, unknowns
        return Fate.COMMIT, 1


@dataclass(frozen=True)
class Plan:
    """The whole seeded plan of one audit."""

    seed: int
    transactions: tuple[PlannedTx, ...]
    kills_at_s: tuple[float, ...]  # nemesis moments (used only with a launched endpoint)
    lapse_share: float

    def lapses(self, tx: str, attempt: int) -> bool:
        """Whether a consumer lets the invisible time lapse on this delivery: drawn from the seed, the
        transaction and the attempt, so it does not depend on which consumer or thread receives it."""
        if attempt > 1 or not self.lapse_share:
            return False
        digest = hashlib.sha256(f"{self.seed}/{tx}/{attempt}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.lapse_share

    def digest(self) -> str:
        """SHA-256 of ``describe``: the history's ``plan_sha256``."""
        return hashlib.sha256(self.describe().encode()).hexdigest()

    def describe(self) -> str:
        """The plan as canonical JSON: equal for equal seeds and options."""
        rows = [dict(asdict(t), fate=t.fate.value, fault=t.fault.value) for t in self.transactions]
        return json.dumps({"seed": self.seed, "kills_at_s": list(self.kills_at_s),
                           "lapse_share": self.lapse_share, "transactions": rows}, sort_keys=True)


def fault_kinds(text: str) -> tuple[Fault, ...]:
    """``--fault-kinds late,duplicated`` -> the faults; ConfigError for an unknown name."""
    names = {f.value: f for f in Fault if f is not Fault.NONE}
    kinds = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in names:
            raise ConfigError(f"--fault-kinds {name}: choose among {', '.join(names)}")
        kinds.append(names[name])
    if not kinds:
        raise ConfigError("--fault-kinds: name at least one fault")
    return tuple(kinds)


def make_plan(seed: int, duration_s: float, rate: float, producers: int, faults: str,
              kinds: tuple[Fault, ...] | None = None, mix: BenchmarkMix | None = None) -> Plan:
    """The plan for ``duration_s`` seconds at ``rate`` transactions/s over ``producers`` producer slots.

    Faults go only to transactions that end themselves (a fault on an end-transaction needs one). A closed
    producer needs another producer of its group, so with one producer that fault is not drawn.
    ``kinds`` limits the faults drawn (default: all). ``mix``: fates as upstream's benchmark draws
    them, instead of the audit's own weights.
    """
    if duration_s <= 0 or rate <= 0 or producers < 1:
        raise ConfigError("--duration and --rate must be positive and --producers at least 1")
    if faults not in FAULT_LEVELS:
        raise ConfigError(f"--faults {faults}: choose one of {', '.join(FAULT_LEVELS)}")
    rng = random.Random(seed)
    drawn = [f for f in (kinds or Fault) if f is not Fault.NONE
             and (producers > 1 or f is not Fault.PRODUCER_CLOSED)]
    fates = [o for o, _ in _FATE_WEIGHTS]
    weights = [w for _, w in _FATE_WEIGHTS]
    count = max(1, round(duration_s * rate))
    transactions = []
    for n in range(count):
        fate, unknowns = mix.draw(rng) if mix is not None else (rng.choices(fates, weights)[0], 1)
        fault = Fault.NONE
        if fate.ends_itself and drawn and rng.random() < _FAULT_SHARE[faults]:
            fault = rng.choice(drawn)
            if fault is Fault.LATE_AFTER_ROLLBACK:
                fate = Fate.COMMIT  # the local transaction commits, after the check read "none"
        transactions.append(PlannedTx(f"audit-{seed}-{n}", round(n / rate, 6), n % producers, fate,
                                      fault, unknowns))
    kills = sorted(round(rng.uniform(0.2, 0.8) * duration_s, 3) for _ in range(_KILLS[faults]))
    return Plan(seed, tuple(transactions), tuple(kills), _LAPSE_SHARE[faults])


def add_workload_arguments(parser: argparse.ArgumentParser, faults_default: str, faults_help: str) -> None:
    """The plan's options, shared by ``txmq audit`` and ``txmq diff`` (``make_plan``'s arguments)."""
    parser.add_argument("--duration", type=float, default=30, help="seconds of workload (default 30)")
    parser.add_argument("--rate", type=float, default=5, help="transactions started per second (default 5)")
    parser.add_argument("--producers", type=int, default=2, help="producers, one group (default 2)")
    parser.add_argument("--consumers", type=int, default=2, help="simple consumers, one group (default 2)")
    parser.add_argument("--seed", type=int, help="seed of the plan (default: a fresh one, printed)")
    parser.add_argument("--faults", choices=FAULT_LEVELS, default=faults_default,
                        help=f"{faults_help} (default {faults_default})")
    parser.add_argument("--fault-kinds", metavar="KIND,...",
                        help="only these client-side faults: withheld, duplicated, late, "
                             "late-after-rollback, producer-closed (default all)")
    parser.add_argument("--benchmark-mix", metavar="SR,SU,CU",
                        help="local transactions as upstream's benchmark TransactionProducer draws them: "
                             "rolled back with share SR (-sr), else left unknown with SU (-su), else "
                             "committed; each check of an unknown one answered UNKNOWN with CU (-cu), else "
                             "COMMIT (default: the audit's own mix)")


def seeded_plan(args: argparse.Namespace, announce: Callable[[str], None]) -> Plan:
    """The plan of ``add_workload_arguments``' options; the seed (``--seed``, or a fresh one) is
    announced before anything else can fail, so that a run can always be repeated."""
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    announce(f"seed {seed}")
    kinds = fault_kinds(args.fault_kinds) if args.fault_kinds else None
    mix = BenchmarkMix.parse(args.benchmark_mix) if args.benchmark_mix else None
    return make_plan(seed, args.duration, args.rate, args.producers, args.faults, kinds, mix)
