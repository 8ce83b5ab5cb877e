"""The invariant catalogue: every invariant txmq checks, defined once, as data.

An invariant has one name everywhere: an operator of that name in ``spec/TxMQ.tla`` (checked by TLC), a
function of that name in ``model_tests/invariants.py`` (checked after every step of the Hypothesis
machines), a check of that id in ``spark_validation`` (checked over whole traces). ``txmq spec replay``
judges replayed counterexamples under these names, and ``docs/invariants.md`` is generated from this
module::

    python -m txmq.catalogue --markdown > docs/invariants.md

``tests/test_catalogue.py`` fails when the spec, its model configurations, ``spec/models.json``, replay or
the generated page drifts from the entries below. Adding an invariant is adding one entry; the layers it
names must then implement it under that name: ``model_tests/test_catalogue_layer.py`` and Spark's
injection tests (every check must be seen violated) fail until they do.

Meanings are stated over the trace (``docs/trace-events.md``), because every layer but the spec judges
traces; the spec states the same guarantee over its own variables.
"""

from __future__ import annotations

import argparse
import enum
import sys
from collections.abc import Sequence
from dataclasses import dataclass


class Kind(enum.Enum):
    """Safety: nothing bad ever happens. Liveness: something good eventually happens."""

    SAFETY = "safety"
    LIVENESS = "liveness"


class Modes(enum.Enum):
    """Which broker modes guarantee an invariant."""

    BOTH = "both"  # strict and rocketmq: a violation is a bug in either mode
    PART = "both, part strict"  # holds in both modes except its ``strict_part``, which only strict keeps
    STRICT = "strict"  # only strict mode guarantees it


class Layer(enum.Flag):
    """Where an invariant is checked, always under its catalogue name."""

    SPEC = enum.auto()  # an operator of spec/TxMQ.tla, checked by the TLC models that list it
    MODEL = enum.auto()  # a function of model_tests/invariants.py, checked against a live broker
    SPARK = enum.auto()  # a check of spark_validation, over a whole trace


SAFETY, LIVENESS = Kind.SAFETY, Kind.LIVENESS
BOTH, PART, STRICT = Modes.BOTH, Modes.PART, Modes.STRICT
SPEC, MODEL, SPARK = Layer.SPEC, Layer.MODEL, Layer.SPARK


@dataclass(frozen=True)
class Invariant:
    """One entry of the catalogue.

    ``strict_part``: for ``PART``, the part only strict mode keeps. ``rocketmq``: the upstream anomalies
    that make rocketmq mode violate it by design ("expected in rocketmq mode"); empty when rocketmq mode
    keeps it too. ``not_in_spec``: why the spec does not state it (required exactly when ``SPEC`` is not
    among the layers); such an invariant is checked over traces only.
    """

    name: str
    kind: Kind
    modes: Modes
    layers: Layer
    meaning: str
    strict_part: str = ""
    rocketmq: str = ""
    not_in_spec: str = ""

    def __post_init__(self) -> None:
        if (self.modes is PART) != bool(self.strict_part):
            raise ValueError(f"{self.name}: a strict part is given exactly for modes {PART.value!r}")
        if self.modes is BOTH and self.rocketmq:
            raise ValueError(f"{self.name}: kept in both modes, so rocketmq mode cannot be expected to "
                             "break it")
        if (SPEC in self.layers) == bool(self.not_in_spec):
            raise ValueError(f"{self.name}: give not_in_spec exactly when the spec does not state it")

    @property
    def expected_in_rocketmq(self) -> bool:
        """Whether rocketmq-mode traces are expected to violate (the strict part of) this invariant."""
        return bool(self.rocketmq)


_DELIVERY_BELOW_SPEC = (
    "queue positions, consumer groups and their offsets are store and consumer mechanics below the "
    "protocol's abstraction; the spec states only that a delivered message is a real message already "
    "written (the DELIVER step of spec/TxMQTrace.tla)"
)

ENTRIES: tuple[Invariant, ...] = (
    Invariant(
        "NoUncommittedVisible", SAFETY, BOTH, SPEC | MODEL | SPARK,
        "A transaction's REAL_PUT comes after an END_TX COMMIT of it with result OK, and the first DELIVER "
        "of a position (topic, queue_id, queue_offset) to a group after the REAL_PUT (or a plain message's "
        "PLAIN_PUT) there: nothing uncommitted is visible."),
    Invariant(
        "CommitMatchesLocal", SAFETY, BOTH, SPEC | MODEL | SPARK,
        "A transaction's first REAL_PUT comes after a LOCAL_TX of it with action COMMIT (its producer's "
        "own decision or a check answer)."),
    Invariant(
        "RollbackNeverVisible", SAFETY, BOTH, SPEC | MODEL | SPARK,
        "A transaction whose producer side declared ROLLBACK (a LOCAL_TX, own decision or check answer) "
        "has no REAL_PUT."),
    Invariant(
        "SingleResolution", SAFETY, STRICT, SPEC | MODEL | SPARK,
        "A transaction is resolved at most once: at most one END_TX of it has result OK.",
        rocketmq="a duplicate or conflicting END_TX is applied again (S5, S6, S7; #5574, #8158, #2694)"),
    Invariant(
        "NoDuplicateReal", SAFETY, STRICT, SPEC | MODEL | SPARK,
        "A transaction has at most one REAL_PUT.",
        rocketmq="a second commit of the same half or of another copy: duplicate END_TX, a late commit "
        "after a renewal, a re-check after a lost Op buffer (S5, S20, S21, S30, S31; #5574, #2117)"),
    Invariant(
        "CheckBound", SAFETY, PART, SPEC | MODEL | SPARK,
        "Every HALF_RENEW's check count is one more than that of the copy it renews (an original half, "
        "and a copy an admin RESUME re-appends, count 0: resume restarts the count by design), no count "
        "exceeds check_max, and a CHECK carries the count of the copy it checks.",
        strict_part="one live chain of copies per transaction: its HALF_RENEW counts go 1, 2, ... k in "
        "seq order, from 0 again after a RESUME",
        rocketmq="two live chains of one transaction: a copy renewed again after a checkpoint regression "
        "(S32: a crash before the checkpoint was persisted), both halves of a retried send (S33), a "
        "second admin resume of the same discarded record"),
    Invariant(
        "CheckAfterTimeout", SAFETY, BOTH, SPEC | MODEL | SPARK,
        "No CHECK of a transaction comes before its first HALF_PUT is more than transaction_timeout_ms old "
        "(transactions with an IMMUNITY renewal are exempt: their window is not in the trace)."),
    Invariant(
        "NoCheckAfterDurableOp", SAFETY, BOTH, SPEC | MODEL | SPARK,
        "No CHECK comes after an OP_PUT that lists the copy it checks or the copy that copy renewed."),
    Invariant(
        "DiscardOnlyAtMax", SAFETY, PART, SPEC | MODEL | SPARK,
        "A DISCARD happens only to a copy carrying check_max checks (result CHECK_MAX) or past retention "
        "(result RETENTION, taken on trust: the trace does not carry the retention time).",
        strict_part="no REAL_PUT of a transaction after its DISCARD, unless an admin RESUME came in between",
        rocketmq="a late commit is applied after the discard, as the half is still readable"),
    Invariant(
        "OpRefersToHalf", SAFETY, PART, SPEC | MODEL | SPARK,
        "Every half offset an OP_PUT lists was put earlier by a HALF_PUT or a HALF_RENEW.",
        strict_part="no half offset is listed by two Op entries",
        rocketmq="a duplicate or conflicting END_TX queues a second Op entry for the same half (S5, S7)"),
    Invariant(
        "DeliveryIntegrity", SAFETY, BOTH, MODEL | SPARK,
        "A DELIVER carries the txn and body_crc of the REAL_PUT at its position (of a PLAIN_PUT: the "
        "body_crc), and per consumer group and queue the first deliveries come in queue-offset order; later "
        "deliveries of a position are redeliveries (a pop consumer's attempt 2, 3, ..., or a pull consumer "
        "reading a position again, the same DELIVER twice, when its offset was not committed), expected "
        "under at-least-once delivery.",
        not_in_spec=_DELIVERY_BELOW_SPEC),
    Invariant(
        "QueueContiguity", SAFETY, BOTH, MODEL | SPARK,
        "The REAL_PUT and PLAIN_PUT queue offsets of each (topic, queue_id) are 0, 1, 2, ... without gaps "
        "or repeats.",
        not_in_spec=_DELIVERY_BELOW_SPEC),
    Invariant(
        "HalfCacheBounded", SAFETY, BOTH, SPEC,
        "The half cache (txmq's RIP-50 extension) holds at most its capacity of distinct original halves; "
        "the trace does not show its contents, so only the spec checks it."),
    Invariant(
        "RefusedOnlyWhenResolved", SAFETY, STRICT, SPEC | MODEL,
        "An END_TX is refused ALREADY_RESOLVED only when its transaction is resolved: an END_TX of it had "
        "result OK, or it was discarded and not resumed since."),
    Invariant(
        "EventuallyResolved", LIVENESS, BOTH, SPEC | SPARK,
        "Every transaction whose half was stored ends with an END_TX OK (COMMIT or ROLLBACK) or a DISCARD, "
        "unless an EXPIRE lists one of its halves among those deleted unresolved (it can no longer resolve); "
        "over a trace, every transaction old enough to judge."),
    Invariant(
        "EventuallyDelivered", LIVENESS, BOTH, SPARK,
        "Every REAL_PUT reaches every consumer group subscribed to its topic, unless its commitlog_offset is "
        "below the last EXPIRE's (retention deleted it before that group read it); over a trace, every "
        "REAL_PUT old enough to judge.",
        not_in_spec=_DELIVERY_BELOW_SPEC + ", and consumers are not modelled"),
)

CATALOGUE: dict[str, Invariant] = {entry.name: entry for entry in ENTRIES}

# Spec operators that TLC models list as invariants without being guarantees of the protocol.
SPEC_TYPE_CHECKS = ("TypeOK",)


def names(layer: Layer | None = None, kind: Kind | None = None) -> tuple[str, ...]:
    """Catalogue names in catalogue order, optionally only those checked in ``layer`` / of ``kind``."""
    return tuple(e.name for e in ENTRIES
                 if (layer is None or layer in e.layers) and (kind is None or e.kind is kind))


# ----------------------------------------------------------------------------- docs/invariants.md
_LAYER_HEADINGS = ((SPEC, "spec"), (MODEL, "model tests"), (SPARK, "Spark"))
_MODES_IN_WORDS = {BOTH: "both modes", PART: "both modes, a part strict mode only",
                   STRICT: "strict mode only"}


def _rocketmq_cell(entry: Invariant) -> str:
    if entry.expected_in_rocketmq:
        return "expected to break" if entry.modes is STRICT else "strict part expected to break"
    return "not claimed" if entry.modes is STRICT else "holds"


def render_markdown() -> str:
    """The catalogue as the Markdown page ``docs/invariants.md``."""
    lines = [
        "# Invariant catalogue",
        "",
        "<!-- Generated from txmq/catalogue.py by",
        "     python -m txmq.catalogue --markdown > docs/invariants.md",
        "     Edit the catalogue, not this page: tests/test_catalogue.py compares them. -->",
        "",
        "Every invariant has one name in every layer: a TLA+ operator in `spec/TxMQ.tla` (checked by the",
        "TLC models that list it), a function in `model_tests/invariants.py` (checked after every step of",
        "the Hypothesis state machines) and a check in `spark_validation` (checked over a whole trace).",
        "Meanings are stated over the trace (`docs/trace-events.md`). *Modes*: `both` holds in strict and",
        "rocketmq mode; `strict` only in strict mode; `both, part strict` holds in both except a part only",
        "strict keeps. *rocketmq mode*: whether upstream behaviour breaks it by design; a validator reports",
        "such violations in a rocketmq-mode trace as \"expected in rocketmq mode\", not as failures.",
        "S-numbers are the scenarios of [rocketmq-behaviour.md](rocketmq-behaviour.md#scenarios);",
        "#-numbers are issues of apache/rocketmq.",
        "",
        "| invariant | kind | modes | " + " | ".join(h for _, h in _LAYER_HEADINGS) + " | rocketmq mode |",
        "|---|---|---|" + "---|" * len(_LAYER_HEADINGS) + "---|",
    ]
    for e in ENTRIES:
        cells = ["yes" if layer in e.layers else ("trace only" if layer is SPEC else "-")
                 for layer, _ in _LAYER_HEADINGS]
        lines.append(f"| [`{e.name}`](#{e.name.lower()}) | {e.kind.value} | {e.modes.value} | "
                     + " | ".join(cells) + f" | {_rocketmq_cell(e)} |")
    lines += ["", "`TypeOK` in the spec is a type check of its variables, not a guarantee: not listed.", ""]
    for e in ENTRIES:
        heading = f"*{e.kind.value.capitalize()}, {_MODES_IN_WORDS[e.modes]}.*"
        lines += [f"## {e.name}", "", f"{heading} {e.meaning}", ""]
        if e.strict_part:
            lines += [f"- Strict mode only: {e.strict_part}.", ""]
        if e.rocketmq:
            lines += [f"- Expected in rocketmq mode: {e.rocketmq}.", ""]
        if e.not_in_spec:
            lines += [f"- Not in the spec: {e.not_in_spec}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m txmq.catalogue``: list the catalogue, or print it as Markdown."""
    parser = argparse.ArgumentParser(prog="python -m txmq.catalogue", description=main.__doc__)
    parser.add_argument("--markdown", action="store_true", help="print docs/invariants.md")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(render_markdown())
    else:
        width = max(len(n) for n in CATALOGUE)
        for e in ENTRIES:
            print(f"{e.name:<{width}}  {e.kind.value:<8}  {e.modes.value}")
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through main()
    sys.exit(main())
