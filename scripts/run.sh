#!/usr/bin/env bash
# The main job: simulate a workload through the broker, write its trace, validate it with Spark,
# model-check the spec when TLC is available. Arguments are passed to `txmq run` (see --help).
TXMQ_EXTRAS="spark"
source "$(dirname "$0")/bootstrap.sh"
exec txmq run "$@"
