#!/usr/bin/env bash
# The test suite: ruff, mypy and the import layers (while the first tests run), and pytest under coverage
# (branch coverage of txmq/, must stay >= 90%). A failure of either fails the suite.
# Arguments are passed to pytest. pytest's exit code 5 (no tests collected) counts as a failure.
TXMQ_EXTRAS="spark,test,bench,serve,remoting"
source "$(dirname "$0")/bootstrap.sh"

# The linters; 0 when all three pass. Every one runs, so that one report shows every finding.
lint() {
    local failed=0
    echo "== ruff check" >&2
    ruff check . || failed=1
    echo "== mypy" >&2
    mypy || failed=1
    echo "== import layers (lint-imports)" >&2
    lint-imports --no-cache || failed=1
    return "$failed"
}

rm -f .coverage .coverage.*
# pytest's exit code 5 (no tests collected) is a failure too.
judge() { if [ "$1" -eq 5 ]; then echo "pytest collected no tests ($2): that is a failure" >&2; echo 1; else echo "$1"; fi; }
set +e
if [ "$#" -gt 0 ]; then
    lint
    linted=$?
    echo "== pytest under coverage" >&2
    coverage run -m pytest -q "$@"
    status=$(judge $? "pytest $*")
    status=$(( status > linted ? status : linted ))
else
    # The whole suite as six pytest processes side by side (tests/conftest.py's ``lane``): TLC on the
    # spec's models and mutants, TLC on traces (both CPU-bound JVMs: two processes, so that both cores
    # work once the waiting tests are done; as one, it ran alone for the last four minutes), the tests
    # that run upstream RocketMQ and the audits (their JVMs and clients mostly wait on check intervals and
    # restarts), clients against servers of their own (upstream's Java programs, serve's longest
    # sessions: they wait too), the tests that run
    # servers or Spark on the real clock (they mostly wait too), and the rest. (Running the rest at a
    # lower priority, so that the TLC runs got the cores first, made the rest the longest process: 20
    # min against 16.5.) Their coverage data is combined below; the other five's
    # output follows the rest's.
    spec_log="$(mktemp -t txmq-spec-tests.XXXXXX)"
    tlc_log="$(mktemp -t txmq-tlc-tests.XXXXXX)"
    upstream_log="$(mktemp -t txmq-upstream-tests.XXXXXX)"
    real_time_log="$(mktemp -t txmq-real-time-tests.XXXXXX)"
    clients_log="$(mktemp -t txmq-clients-tests.XXXXXX)"
    # The traces that the upstream and clients processes make for Spark go to the real-time process,
    # whose Spark session judges them (tests/handoffkit.py): one Spark start in the run, not three.
    TXMQ_TEST_HANDOFF="$(mktemp -d -t txmq-handoff.XXXXXX)"
    export TXMQ_TEST_HANDOFF
    coverage run -m pytest -q -m lane_spec >"$spec_log" 2>&1 &
    spec_pid=$!
    coverage run -m pytest -q -m lane_tlc >"$tlc_log" 2>&1 &
    tlc_pid=$!
    coverage run -m pytest -q -m lane_upstream >"$upstream_log" 2>&1 &
    upstream_pid=$!
    coverage run -m pytest -q -m lane_real_time >"$real_time_log" 2>&1 &
    real_time_pid=$!
    coverage run -m pytest -q -m lane_clients >"$clients_log" 2>&1 &
    clients_pid=$!
    # An interrupted run stops all six.
    trap 'kill "$spec_pid" "$tlc_pid" "$upstream_pid" "$real_time_pid" "$clients_pid" 2>/dev/null || true
          rm -f "$spec_log" "$tlc_log" "$upstream_log" "$real_time_log" "$clients_log"
          rm -rf "$TXMQ_TEST_HANDOFF"' EXIT
    # The linters meanwhile (mypy takes half a minute on one core), then the rest of the tests.
    lint
    linted=$?
    echo "== pytest under coverage" >&2
    coverage run -m pytest -q -m "not lane_spec and not lane_tlc and not lane_upstream and not lane_real_time and not lane_clients"
    rest=$(judge $? "tests without TLC, upstream, audits or real-time servers")
    wait "$real_time_pid"
    real_time=$(judge $? "tests with servers on the real clock")
    wait "$upstream_pid"
    upstream=$(judge $? "tests with upstream RocketMQ, and the audits")
    wait "$clients_pid"
    clients=$(judge $? "tests with clients against servers of their own")
    wait "$tlc_pid"
    tlc=$(judge $? "tests with TLC on traces")
    wait "$spec_pid"
    spec=$(judge $? "tests with TLC on the spec's models and mutants")
    echo "== pytest: the tests that run servers or Spark on the real clock" >&2
    cat "$real_time_log"
    echo "== pytest: the tests that run upstream RocketMQ, and the audits" >&2
    cat "$upstream_log"
    echo "== pytest: the tests that run clients against servers of their own" >&2
    cat "$clients_log"
    echo "== pytest: the tests that run TLC on traces" >&2
    cat "$tlc_log"
    echo "== pytest: the tests that run TLC on the spec's models and mutants" >&2
    cat "$spec_log"
    status=$(( rest > tlc ? rest : tlc ))
    status=$(( status > spec ? status : spec ))
    status=$(( status > upstream ? status : upstream ))
    status=$(( status > real_time ? status : real_time ))
    status=$(( status > clients ? status : clients ))
    status=$(( status > linted ? status : linted ))
fi
set -e
coverage combine -q || true
echo "== coverage of txmq/ (branch)" >&2
if [ "$#" -gt 0 ]; then
    # Some tests only: their coverage is shown, but the 90% floor is the whole suite's.
    coverage report --fail-under=0
else
    coverage report
fi
exit "$status"
