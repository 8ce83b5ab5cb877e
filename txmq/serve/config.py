"""Settings of the gRPC front end, named after upstream's ``ProxyConfig`` and with its defaults.

They are the proxy's, not the broker's: how large a body may be, how long a message may stay invisible,
how long a long poll may last, how long the proxy remembers a transaction id. ``txmq serve`` takes them
as ``--proxy SETTING=VALUE``; tests shrink the times.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from txmq.errors import ConfigError


@dataclass(frozen=True)
class ServeConfig:
    """What ``txmq serve`` is configured with besides the broker. Times are milliseconds."""

    max_message_size: int = 4 * 1024 * 1024  # ProxyConfig.maxMessageSize
    min_invisible_ms_for_receive: int = 10_000  # ProxyConfig.minInvisibleTimeMillsForRecv
    max_invisible_ms: int = 12 * 3600 * 1000  # ProxyConfig.maxInvisibleTimeMills
    default_invisible_ms: int = 60_000  # ProxyConfig.defaultInvisibleTimeMills (auto-renewing receives)
    min_long_polling_ms: int = 5_000  # grpcClientConsumerMinLongPollingTimeoutMillis
    max_long_polling_ms: int = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis
    long_polling_reserve_ms: int = 100  # longPollingReserveTimeInMillis
    receive_batch_size: int = 32  # grpcClientConsumerLongPollingBatchSize
    transaction_data_expire_ms: int = 30_000  # transactionDataExpireMillis
    transaction_data_max_num: int = 15  # transactionDataMaxNum
    # transactionHeartbeatPeriodSecond: rocketmq mode makes a producer group reachable for checks only at
    # this heartbeat (txmq.serve.heartbeat)
    transaction_heartbeat_period_ms: int = 20_000
    queues_per_topic: int = 4  # queues of a topic declared without a count (upstream's default is 8)
    max_delivery_attempts: int = 17  # a group's retryMaxTimes (16) + 1, sent to consumers in Settings

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"{f.name} must be a positive integer, got {value!r}")
        if self.min_long_polling_ms > self.max_long_polling_ms:
            raise ConfigError("min_long_polling_ms must not exceed max_long_polling_ms")
        if self.min_invisible_ms_for_receive > self.max_invisible_ms:
            raise ConfigError("min_invisible_ms_for_receive must not exceed max_invisible_ms")

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> ServeConfig:
        """Build from ``--proxy`` pairs; unknown names are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown proxy setting(s) {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(known))}")
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, for the trace header."""
        return asdict(self)
