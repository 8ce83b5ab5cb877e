"""Fixtures of the broker tests (helpers live in ``brokerkit``): ``make_env`` builds brokers on a
ManualClock with a MemorySink under ``tmp_path`` and closes them afterwards; ``mode`` runs a test in both
modes for behaviour they share."""

from __future__ import annotations

import os

# The serve and audit tests load gRPC into this process, and the TLC and Spark tests then fork children
# with a preexec_fn (txmq.proc): gRPC's fork handlers abort such a child ("epoll_wait error: Bad file
# descriptor", exit -6). gRPC reads this when it loads, so it is set before anything imports it.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import handoffkit
import pytest
from brokerkit import MODES, START_MS, STORE_KINDS, Env, EnvFactory
from tlc_tools import TLC_CHECKED, require_tlc
from upstreamkit import session_cluster, stop_session_cluster

from txmq.broker.facade import Broker
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.store.faults import StoreFaults, faulty_opener
from txmq.store.memory import memory_opener
from txmq.store.message_store import MessageStore
from txmq.trace.sinks import MemorySink
from txmq.upstream import UpstreamCluster


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The scenario tests (``test_scenarios_*``) run over both stores: the store on disk and the one in
    memory must give the broker the same behaviour. A test that needs the disk itself (file sizes, a full
    disk) asks for ``store_kind`` "disk" with ``@pytest.mark.disk_store``."""
    if "make_env" not in metafunc.fixturenames or not metafunc.module.__name__.startswith("test_scenarios_"):
        return
    kinds = ["disk"] if metafunc.definition.get_closest_marker("disk_store") else list(STORE_KINDS)
    metafunc.parametrize("store_kind", kinds, indirect=True)


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    """Which store ``make_env`` opens: "disk" unless the test is parametrized over both."""
    return str(getattr(request, "param", "disk"))


@pytest.fixture
def make_env(tmp_path: Path, store_kind: str) -> Iterator[EnvFactory]:
    """``make_env(mode, **config)``: a fresh broker in its own directory under ``tmp_path``, over the store
    ``store_kind`` names (one memory "disk" per test, so restarts find what was written)."""
    made: list[Env] = []
    opener = memory_opener() if store_kind == "memory" else MessageStore.open

    def factory(mode: str = "strict", start_ms: int = START_MS, **config: Any) -> Env:
        directory = tmp_path / f"store{len(made)}"
        clock = ManualClock(start_ms)
        sink = MemorySink()
        faults = StoreFaults()
        broker = Broker(directory, BrokerConfig(mode=mode, **config), clock, sink,
                        open_store=faulty_opener(faults, opener))
        env = Env(broker, clock, sink, directory, faults)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.broker.close()


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamCluster]:
    """Upstream RocketMQ (name server, broker, proxy), one per session; see ``upstreamkit``."""
    yield from session_cluster(tmp_path_factory.mktemp("upstream"))


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """Both modes, for behaviour they share."""
    return request.param


# Test modules that run clients against servers of their own and mostly wait on them: upstream's Java
# programs from ROCKETMQ_HOME on clusters of their own, and serve's longest sessions with the official
# clients. A process of their own: after the session cluster's tests the Java ones made the upstream
# process the longest (25 min in a fresh-clone run, 6 of them theirs), and the serve sessions made the
# real-time process, which mostly waits, the longest after that (26 min).
_CLIENT_MODULES = ("test_serve_java", "test_remoting_java", "test_upstream_trace", "test_serve_grpc",
                   "test_serve_grpc_stubs", "test_serve_grpc_no_loss", "test_serve_types", "test_serve_fifo",
                   "test_serve_fuzz", "test_serve_clock", "test_serve_examples", "test_recipes")


# Test modules that run servers and clients on the real clock (serve, remoting, Spark's JVM). The
# import's Spark tests join them: they share that process's Spark session instead of starting one.
_REAL_TIME_PREFIXES = ("test_serve_", "test_remoting_", "spark_validation.tests.", "test_import_validate")
# Servers on the real clock whose tests use little CPU (they wait on check intervals and clients): they
# join the rest, which ended four minutes before the real-time process in a fresh-clone run.
_QUIET_REAL_TIME = ("test_serve_fidelity", "test_serve_node", "test_remoting_cpp")
# Spark in child processes with a per-user cache of their own (the driver's class archive made afresh):
# nothing shared with the real-time process, which ends last; CPU-bound, as the rest are.
_OWN_SPARK = ("spark_validation.tests.test_classes",)
# The audits of txmq serve: each waits out its workload and settle time on the real clock, as upstream's
# tests wait on its check intervals and restarts; they share that process, which ends first otherwise.
_AUDIT_PREFIX = "test_audit_"
# The spec's own checks with TLC (the models and the mutants): their process runs beside the one that
# validates traces with TLC, so that two TLC runs use the two cores once the waiting tests are done.
_SPEC_MODULES = ("test_tla_models", "test_tla_mutants")


def lane(item: pytest.Item) -> str:
    """Which of ``scripts/test.sh``'s six pytest processes runs the test: ``clients`` (clients against
    servers of their own: upstream's Java programs, serve's longest sessions), ``upstream`` (upstream's
    session cluster, and the audits: they mostly wait on JVMs and check intervals), ``real_time``
    (servers and Spark on the real clock), ``spec`` (TLC on the spec's models and mutants), ``tlc`` (the
    TLC runs of the other tests: CPU-bound JVMs), or ``rest``. A TLC check of a session recorded on the
    real clock stays in its module's process: it mostly waits on the session."""
    module = getattr(item, "module", None)
    name = module.__name__ if module is not None else ""
    if item.get_closest_marker("spark_takeover") is not None:
        return "real_time"  # Spark on a trace another process made, in the session of Spark's process
    if "upstream" in getattr(item, "fixturenames", ()) or name.startswith(_AUDIT_PREFIX):
        return "upstream"  # a client module's test on the session's cluster too: one cluster per session
    if name in _CLIENT_MODULES:
        return "clients"
    if name.startswith(_REAL_TIME_PREFIXES) and name not in _QUIET_REAL_TIME + _OWN_SPARK:
        return "real_time"
    if item.get_closest_marker("needs_tlc") is None:
        return "rest"
    return "spec" if name in _SPEC_MODULES else "tlc"


# The node id of the last test that uses the session's upstream cluster, once the tests are ordered.
_LAST_UPSTREAM_TEST: list[str] = []


def _uses_upstream(item: pytest.Item) -> bool:
    return "upstream" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its process's marker (``lane``): ``lane_clients``, ``lane_upstream``,
    ``lane_real_time``, ``lane_spec`` or ``lane_tlc``; the rest carry none. The tests that use the
    session's upstream cluster run first, so that it can stop before the others
    (``pytest_runtest_teardown``): tests, not modules, as the cluster idled at 7.5 CPU s a minute through
    the serve tests of a module with one upstream test (test_audit_types: two minutes of them); none of
    those modules has a module-scoped fixture that would then be set up twice. The tests that validate
    traces handed over by others (``handoffkit``) run last, after their makers."""
    for item in items:
        kind = lane(item)
        if kind != "rest":
            item.add_marker(getattr(pytest.mark, f"lane_{kind}"))
    items.sort(key=lambda item: (item.get_closest_marker("spark_takeover") is not None,  # stable: order
                                 not _uses_upstream(item)))  # kept within
    _LAST_UPSTREAM_TEST[:] = [item.nodeid for item in items if _uses_upstream(item)][-1:]


def _handed_over(item: pytest.Item) -> str | None:
    """The name a test hands traces over as (``spark_handoff``), if it does."""
    marker = item.get_closest_marker("spark_handoff")
    return None if marker is None else str(marker.args[0])


def pytest_collection_finish(session: pytest.Session) -> None:
    """The makers of handed-over traces that this process runs (``handoffkit``)."""
    handoffkit.MAKERS.update(name for name in map(_handed_over, session.items) if name is not None)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After the last test that uses the upstream cluster, the cluster stops: idle, its broker alone
    costs an eighth of a core (7.5 CPU s a minute), and in CI the audits of txmq serve and upstream's
    Java examples ran seven minutes beside it. A maker of traces that ended without handing them over
    says so, so that their validating test does not wait for them."""
    if [item.nodeid] == _LAST_UPSTREAM_TEST:
        stop_session_cluster()
    name = _handed_over(item)
    if name is not None:
        handoffkit.maker_ended(name)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Makers that never ran (an interrupted run) hand nothing over; this process's own folder goes."""
    for name in handoffkit.MAKERS:
        handoffkit.maker_ended(name)
    handoffkit.remove_local()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``needs_tlc`` skip without TLC, or fail under CI=true (see ``tlc_tools``)."""
    require_tlc(item)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line saying what TLC checked, so that a green run shows it was not vacuous."""
    checked = TLC_CHECKED
    if checked:
        terminalreporter.write_line(
            f"TLC checked {checked['models']} models, {checked['mutants']} mutants, "
            f"{checked['traces']} traces"
        )
    else:
        terminalreporter.write_line("TLC checked nothing in this run")
