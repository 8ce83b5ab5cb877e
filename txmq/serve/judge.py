"""The judgement of a served session's trace that a test of an application needs at its end: the invariant
catalogue's pure-Python checks (``txmq.checks``, the ones the model tests use), not Spark's.

A small session is judged in milliseconds, where ``txmq validate`` first starts a JVM (31 to 38 s for one
transaction, issue #44), so every language's test fixture can afford it at teardown: the pytest fixture
(``txmq.serve.pytest_plugin``) calls it, and ``txmq serve --judge`` runs it when it stops and exits 1 on a
violation, which is how the JUnit 5 and Node.js recipes (docs/recipes/) fail a test. ``txmq validate``
stays the judge of traces of any size.
"""

from __future__ import annotations

from pathlib import Path

SHOWN = 5  # problems shown per violated name


def judge_session(trace: Path) -> dict[str, list[str]]:
    """What the served session's trace violates, by catalogue name, with the problems: the invariants the
    model tests check, and the outcomes strict mode never shows (empty when all is well); ``rocketmq``
    mode's expected anomalies are not violations."""
    from txmq.checks.invariants import Observation, check
    from txmq.checks.model_outcomes import outcomes_shown
    from txmq.trace.reader import read_events

    header, events = read_events(trace)
    config, strict = header.config, header.mode == "strict"
    rows = list(events)
    observed = Observation(rows, int(config["check_max"]), int(config["transaction_timeout_ms"]),
                           timer_precision_ms=int(config.get("timer_precision_ms", 1_000)))
    return {**check(observed, strict), **outcomes_shown(rows, strict)[1]}


def verdict(trace: Path, problems: dict[str, list[str]]) -> str:
    """``problems`` (from ``judge_session``) as the lines a failed test shows: what is violated, where."""
    lines = [f"{name}: {problem}" for name, found in problems.items() for problem in found[:SHOWN]]
    return f"the session's trace violates the invariant catalogue ({trace}):\n" + "\n".join(lines)
