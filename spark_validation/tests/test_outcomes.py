"""Spark judges the catalogue's outcomes (``txmq.catalogue.outcomes``) its layer lists, by their one judge:
the trace of an anomaly atlas scenario (``txmq.atlas``) showing an outcome in rocketmq mode is validated,
and the outcome must be counted there, not failed; read as a strict trace, an outcome the catalogue says
strict mode never shows fails the run. One scenario per outcome, all in one combined trace per mode."""

from __future__ import annotations

from typing import Any

import pytest

from spark_validation.job import validate
from spark_validation.outcomes import OUTCOME_IDS
from spark_validation.report import SHOWN, VIOLATED, Report
from spark_validation.tests.tracebuilder import Trace
from txmq.atlas.entries import ENTRIES
from txmq.atlas.entry import Entry
from txmq.atlas.rig import rig
from txmq.catalogue.invariants import SPARK
from txmq.catalogue.outcomes import BY_NAME, OUTCOMES


def _scenario_of(outcome: str) -> Entry:
    """The first atlas entry that shows ``outcome`` in rocketmq mode."""
    return next(e for e in ENTRIES if e.catalogue == outcome and e.reproduces)


def _trace_of(mode: str) -> Trace:
    """The rocketmq runs of one scenario per outcome, each transaction prefixed by its outcome, as one
    trace labelled ``mode`` (one validation per mode keeps the test to two Spark jobs)."""
    events: list[dict[str, Any]] = []
    for outcome in OUTCOME_IDS:
        entry = _scenario_of(outcome)
        with rig("rocketmq", **entry.config) as bench:
            entry.scenario(bench)
            events += [{k: f"{outcome}.{v}" if k == "txn" else v for k, v in e.items()
                        if k != "seq" and v is not None} for e in bench.events()]
            cfg = bench.broker.config
    config = {"transaction_timeout_ms": cfg.transaction_timeout_ms,
              "check_interval_ms": cfg.check_interval_ms, "check_max": cfg.check_max, "consumer_groups": {}}
    return Trace(events=events, mode=mode, config=config)


@pytest.fixture(scope="module")
def reports(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report]:
    directory = tmp_path_factory.mktemp("outcomes")
    return {mode: validate(str(_trace_of(mode).write(directory / f"{mode}.parquet")),
                           progress=lambda _: None) for mode in ("rocketmq", "strict")}


def test_spark_judges_exactly_the_outcomes_its_layer_lists() -> None:
    assert OUTCOME_IDS == tuple(o.name for o in OUTCOMES if SPARK in o.layers)


@pytest.mark.parametrize("outcome", OUTCOME_IDS)
def test_an_outcome_is_counted_in_rocketmq_and_fails_strict_where_strict_never_shows_it(
        outcome: str, reports: dict[str, Report]) -> None:
    results = {mode: next(o for o in r.outcomes if o.id == outcome) for mode, r in reports.items()}
    assert results["rocketmq"].status == SHOWN
    assert any(line.startswith(f"{outcome}.") for line in results["rocketmq"].samples)
    assert results["strict"].status == (VIOLATED if BY_NAME[outcome].strict_never else SHOWN)


def test_outcomes_alone_do_not_fail_a_rocketmq_run(reports: dict[str, Report]) -> None:
    assert not [o.id for o in reports["rocketmq"].failed if o.id in OUTCOME_IDS]
    assert {o.id for o in reports["strict"].failed} >= {n for n in OUTCOME_IDS if BY_NAME[n].strict_never}
