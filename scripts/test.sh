#!/usr/bin/env bash
# The test suite: ruff, mypy, the import layers, then pytest under coverage (branch coverage of txmq/, must stay >= 90%).
# Arguments are passed to pytest. pytest's exit code 5 (no tests collected) counts as a failure.
TXMQ_EXTRAS="spark,test,bench,serve"
source "$(dirname "$0")/bootstrap.sh"

echo "== ruff check" >&2
ruff check .

echo "== mypy" >&2
mypy

echo "== import layers (lint-imports)" >&2
lint-imports --no-cache

echo "== pytest under coverage" >&2
rm -f .coverage .coverage.*
set +e
coverage run -m pytest -q "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
coverage combine -q || true
echo "== coverage of txmq/ (branch)" >&2
coverage report
exit "$status"
