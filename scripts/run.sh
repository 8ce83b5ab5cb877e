#!/usr/bin/env bash
# The main job: simulate a workload through the broker, write its trace, validate it with Spark,
# model-check the spec when TLC is available. Arguments are passed to `txmq run` (see --help).
TXMQ_EXTRAS="spark"
source "$(dirname "$0")/bootstrap.sh"
echo "txmq is installed in $VENV/bin: in a new shell, run 'source $VENV/bin/activate' (or call $VENV/bin/txmq)" >&2
exec txmq run "$@"
