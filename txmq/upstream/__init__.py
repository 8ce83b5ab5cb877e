"""Upstream RocketMQ beside txmq: a cluster started from ``ROCKETMQ_HOME`` (see :mod:`.cluster`)."""

from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

__all__ = ["UpstreamCluster", "rocketmq_home"]
