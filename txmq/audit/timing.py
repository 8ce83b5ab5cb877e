"""How long an audit takes, and the endpoint settings that decide it.

An audit is its workload (``--duration``) plus a settle phase that waits for every transaction to be
resolved; a transaction that never decides is resolved only by its discard, after the endpoint's
transaction timeout and ``check-max`` checks, one check interval apart. So the settle time is derived from
the endpoint's settings: the ones the user gives (``--transaction-timeout``, ``--check-interval``,
``--check-max``), else those of a launched ``txmq serve`` (its ``--broker`` overrides, else txmq's
defaults), else upstream's defaults (``BrokerConfig``: 6 s, 30 s, 15, as upstream's broker has them).

``--quick`` is a 20-second workload against an endpoint that checks every 5 s up to 5 times: a launched
``txmq serve`` without check settings of its own is given those (``QUICK_SERVE_SETTINGS``), so the whole
audit takes about two minutes (1 min 57 s measured at a load average of 28).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from txmq.config import BrokerConfig

QUICK_DURATION_S = 20.0
QUICK_SERVE_SETTINGS = {"check_interval_ms": 5_000, "check_max": 5}
SETTLE_MARGIN_S = 10.0
# Starting the clients (and a launched endpoint), shutting them down, judging: measured 25-50 s for a
# --quick audit of txmq serve on a loaded 2-core machine.
START_STOP_S = 40.0
_BAR_WIDTH = 24
_PLAIN_EVERY_S = 30.0  # without a terminal, a progress line at most this often


@dataclass(frozen=True)
class EndpointSettings:
    """The endpoint's transaction settings the audit judges by (seconds), and where they came from."""

    transaction_timeout_s: float
    check_interval_s: float
    check_max: int
    source: str


def _serve_broker_settings(command: str) -> dict[str, str] | None:
    """The ``--broker NAME=VALUE`` settings of a ``txmq serve`` command line, or None for another command."""
    words = shlex.split(command)
    if "serve" not in words or not any(w.endswith("txmq") or w == "txmq.cli" for w in words):
        return None
    settings = {}
    for option, value in zip(words, words[1:], strict=False):
        if option == "--broker":
            key, _, text = value.partition("=")
            settings[key.strip()] = text.strip()
    return settings


def quick_launch(command: str) -> str:
    """A launched ``txmq serve`` given --quick's check settings where it sets none of its own."""
    settings = _serve_broker_settings(command)
    if settings is None:
        return command
    extra = [f"--broker {key}={value}" for key, value in QUICK_SERVE_SETTINGS.items() if key not in settings]
    return " ".join([command, *extra])


def endpoint_settings(args: argparse.Namespace) -> EndpointSettings:
    """The settings given on the command line, else a launched txmq serve's, else upstream's defaults."""
    defaults = BrokerConfig()
    served = _serve_broker_settings(args.launch) if args.launch else None
    known = {"transaction_timeout_ms": defaults.transaction_timeout_ms,
             "check_interval_ms": defaults.check_interval_ms, "check_max": defaults.check_max}
    source = "upstream's defaults"
    if served is not None:
        source = "the launched txmq serve"
        known.update({k: int(v) for k, v in served.items() if k in known and v.lstrip("-").isdigit()})
    given = [args.transaction_timeout, args.check_interval, args.check_max]
    if any(value is not None for value in given):
        source = "the command line" if all(value is not None for value in given) else source + " and the " \
            "command line"
    return EndpointSettings(
        args.transaction_timeout if args.transaction_timeout is not None
        else known["transaction_timeout_ms"] / 1000,
        args.check_interval if args.check_interval is not None else known["check_interval_ms"] / 1000,
        args.check_max if args.check_max is not None else known["check_max"],
        source,
    )


def settle_time_s(transaction_timeout_s: float, check_interval_s: float, check_max: int,
                  first_contact_s: float = 0.0) -> float:
    """The one settle formula: long enough for a never-deciding transaction to be checked check-max times
    (the first check after the timeout, the rest one interval apart, and one interval more for the
    discard), after ``first_contact_s`` seconds before the endpoint can check at all (``txmq diff``: the
    proxy's first heartbeat tells the broker the producer group), plus ``SETTLE_MARGIN_S``; in seconds."""
    return transaction_timeout_s + (check_max + 1) * check_interval_s + first_contact_s + SETTLE_MARGIN_S


def settle_s(settings: EndpointSettings, given: float | None) -> float:
    """The settle time the user gave, else :func:`settle_time_s` of the endpoint's settings."""
    if given is not None:
        return given
    return settle_time_s(settings.transaction_timeout_s, settings.check_interval_s, settings.check_max)


class ProgressBar:
    """Progress of the whole audit against its expected total: one line rewritten in place on a terminal,
    a line every 30 s otherwise. ``update`` takes the driver's progress lines."""

    def __init__(self, total_s: float, write: Callable[[str], None] | None = None,
                 tty: bool | None = None) -> None:
        self.total_s = max(total_s, 1.0)
        self.started = time.monotonic()
        self._write = write or sys.stderr.write
        self._tty = sys.stderr.isatty() if tty is None else tty
        self._last_plain = float("-inf")

    def line(self, what: str, now: float) -> str:
        elapsed = now - self.started
        done = min(elapsed / self.total_s, 1.0)
        filled = int(done * _BAR_WIDTH)
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        return f"txmq audit: [{bar}] {elapsed:4.0f}/{self.total_s:.0f} s  {what}"

    def update(self, what: str) -> None:
        now = time.monotonic()
        if self._tty:
            self._write("\r" + self.line(what, now)[:160].ljust(100))
        elif now - self._last_plain >= _PLAIN_EVERY_S:
            self._last_plain = now
            self._write(self.line(what, now) + "\n")

    def close(self) -> None:
        if self._tty:
            self._write("\n")
