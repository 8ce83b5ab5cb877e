#!/usr/bin/env bash
# The test suite: ruff, mypy, the import layers, then pytest under coverage (branch coverage of txmq/, must stay >= 90%).
# Arguments are passed to pytest. pytest's exit code 5 (no tests collected) counts as a failure.
TXMQ_EXTRAS="spark,test,bench,serve,remoting"
source "$(dirname "$0")/bootstrap.sh"

echo "== ruff check" >&2
ruff check .

echo "== mypy" >&2
mypy

echo "== import layers (lint-imports)" >&2
lint-imports --no-cache

echo "== pytest under coverage" >&2
rm -f .coverage .coverage.*
# pytest's exit code 5 (no tests collected) is a failure too.
judge() { if [ "$1" -eq 5 ]; then echo "pytest collected no tests ($2): that is a failure" >&2; echo 1; else echo "$1"; fi; }
set +e
if [ "$#" -gt 0 ]; then
    coverage run -m pytest -q "$@"
    status=$(judge $? "pytest $*")
else
    # The whole suite as four pytest processes side by side: the TLC tests (the models, the mutants, the
    # trace batch: CPU-bound JVMs), the tests that run upstream RocketMQ (its JVMs mostly wait on check
    # intervals and restarts), the tests that run servers or Spark on the real clock (they mostly wait
    # too), and the rest. Their coverage data is combined below; the other three's output follows the
    # rest's.
    tlc_log="$(mktemp -t txmq-tlc-tests.XXXXXX)"
    upstream_log="$(mktemp -t txmq-upstream-tests.XXXXXX)"
    real_time_log="$(mktemp -t txmq-real-time-tests.XXXXXX)"
    coverage run -m pytest -q -m needs_tlc >"$tlc_log" 2>&1 &
    tlc_pid=$!
    coverage run -m pytest -q -m "needs_upstream and not needs_tlc" >"$upstream_log" 2>&1 &
    upstream_pid=$!
    coverage run -m pytest -q -m "real_time and not needs_tlc and not needs_upstream" >"$real_time_log" 2>&1 &
    real_time_pid=$!
    # An interrupted run stops all four.
    trap 'kill "$tlc_pid" "$upstream_pid" "$real_time_pid" 2>/dev/null || true
          rm -f "$tlc_log" "$upstream_log" "$real_time_log"' EXIT
    coverage run -m pytest -q -m "not needs_tlc and not needs_upstream and not real_time"
    rest=$(judge $? "tests without TLC, upstream or real-time servers")
    wait "$real_time_pid"
    real_time=$(judge $? "tests with servers on the real clock")
    wait "$upstream_pid"
    upstream=$(judge $? "tests with upstream RocketMQ")
    wait "$tlc_pid"
    tlc=$(judge $? "tests with TLC")
    echo "== pytest: the tests that run servers or Spark on the real clock" >&2
    cat "$real_time_log"
    echo "== pytest: the tests that run upstream RocketMQ" >&2
    cat "$upstream_log"
    echo "== pytest: the tests that run TLC" >&2
    cat "$tlc_log"
    status=$(( rest > tlc ? rest : tlc ))
    status=$(( status > upstream ? status : upstream ))
    status=$(( status > real_time ? status : real_time ))
fi
set -e
coverage combine -q || true
echo "== coverage of txmq/ (branch)" >&2
coverage report
exit "$status"
