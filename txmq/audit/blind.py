"""When an endpoint's check can be lost before the application sees it, though the endpoint counts it.

Upstream renews a half with its check count one higher, then sends the check one-way
(``TransactionalMessageServiceImpl.putBackHalfMsgQueue``, then
``AbstractTransactionalMessageCheckListener.sendCheckMessage``): a check that reaches no application still
counts towards check-max. From outside, two kinds of moment are known to lose checks:

- *closing windows*: a producer the audit is shutting down (the ``producer-closed`` fault) may be sent a
  check between its close and its unregistration;
- *unheard windows* (heartbeat-gated check routing): upstream's broker learns a proxy client's producer
  group only at the proxy's transaction heartbeat (``ClusterTransactionService.scanProducerHeartBeat``,
  every ``transactionHeartbeatPeriodSecond``), so from each start of the endpoint (the audit's start, or a
  nemesis kill) until a heartbeat period after the first producer started since, a check finds "channel
  is null" and is lost. txmq serve reproduces this in rocketmq mode (``txmq.serve.heartbeat``). Over
  remoting a broker learns the group from the client's own HEART_BEAT (``ClientManageProcessor``), in both
  modes: after a crash the C++-core client reconnects and sends its next one at its timer, so its
  ``client`` ``resume`` record (``txmq.audit.remoting``) closes a window as a producer start does.

In a closing window a missing check is placed by the cadence of the checks that were seen
(``checks_lost``), and counts as lost only if it falls in the window, give or take the cadence's jitter.
An unheard window after a crash cannot be read that way: the endpoint does not check while it is down, and
once up it checks every half at its interval while no producer can be reached, so a transaction alive
in the window may lose all its remaining checks there, however few it was seen to get
(``checks_lost_unheard``: as many as the window holds check intervals).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from txmq.audit.history import Record

Window = tuple[float, float]

# Added to a check cadence's jitter when placing a missing check: the history records a check when the
# audit's handler runs, which on a loaded machine lags the endpoint's sending by up to a few hundred ms
# (median 0.1 s in a 26-minute soak beside the test suite; 0.1 s of slack left 4 of its lost checks
# unexplained, 0.3 s none).
CADENCE_SLACK_S = 0.5
# Added to the heartbeat period: the heartbeat is one-way and the broker registers the group when it has
# read it; a loaded machine delays both.
HEARTBEAT_SLACK_S = 1.0
# Checks a gap between two seen checks may miss outside every window, and its checks inside the windows
# still count as lost there: the cadence placing them is approximate at a window's edges. A gap with more
# missing outside the windows shows an endpoint that was not checking at its cadence, and explains none.
UNEXPLAINED_IN_GAP = 2


def closing_windows(ordered: Iterable[Record]) -> list[Window]:
    """When producers were being shut down by the producer-closed fault: from the fault, or the start of
    the shutdown when the driver waited for the producer's other transactions (its ``client`` closing
    record), to the end of the producer's shutdown (its ``client`` stop record; the start alone in a
    history without one).
    A check the endpoint relays to that producer then may never reach the application. ``ordered``: the
    history in time order (a producer's name is used once, so it is closed at most once)."""
    closing: dict[str, float] = {}
    windows = []
    for record in ordered:
        if record["ev"] == "fault" and record["fault"] == "producer-closed":
            closing[record["producer"]] = float(record["t"])
        elif record["ev"] == "client" and record["action"] == "closing" and record["producer"] in closing:
            closing[record["producer"]] = float(record["t"])  # its shutdown began only now
        elif record["ev"] == "client" and record["action"] == "stop" and record["producer"] in closing:
            windows.append((closing.pop(record["producer"]), float(record["t"])))
    return windows + [(begin, begin) for begin in closing.values()]


def unheard_windows(ordered: Iterable[Record], heartbeat_s: float | None,
                    open_until: float | None = None) -> list[Window]:
    """When the endpoint may not yet know the producer group (see the module docstring): from the audit's
    start and from each nemesis kill until ``heartbeat_s`` (plus slack) after the first producer start (or
    resume) that followed. None: the endpoint registers producers at once (strict mode), no such window.
    A window no producer start has closed yet (the endpoint is still down, or its clients not yet back)
    ends at ``open_until``, or is left out when that is None."""
    if heartbeat_s is None:
        return []
    windows = []
    begin: float | None = 0.0
    for record in ordered:
        if record["ev"] == "nemesis" and record["action"] == "kill" and begin is None:
            begin = float(record["t"])
        elif record["ev"] == "client" and record["action"] in ("start", "resume") and begin is not None:
            windows.append((begin, float(record["t"]) + heartbeat_s + HEARTBEAT_SLACK_S))
            begin = None
    if begin is not None and open_until is not None:
        windows.append((begin, open_until))
    return windows


def downtime_s(ordered: Iterable[Record], now: float) -> float:
    """How long the nemesis held the endpoint down: from each kill to the next ``up`` (or to ``now``).
    No check is made then, lost or not, so a transaction alive across it needs that much longer to reach
    check-max."""
    total, down_at = 0.0, None
    for record in ordered:
        if record["ev"] != "nemesis":
            continue
        if record["action"] == "kill" and down_at is None:
            down_at = float(record["t"])
        elif record["action"] == "up" and down_at is not None:
            total += float(record["t"]) - down_at
            down_at = None
    return total + (now - down_at if down_at is not None else 0.0)


def checks_lost(times: list[float], born: float, check_max: int, windows: list[Window],
                interval_s: float | None = None) -> int:
    """How many of the ``check_max - len(times)`` checks a client did not see may have been lost in
    ``windows``. A missing check is placed before the first seen one, inside a gap of about two cadences
    or more, or after the last (check-max in all), a cadence apart. The cadence is the seen checks' median
    gap, or the endpoint's check interval ``interval_s`` when that median is more than half as long again:
    two checks seen either side of a restart have one gap, the restart's, which is no cadence (a
    transaction of the upstream audit through crashes, seen checked at 7.9 s and 50.7 s, was called stuck
    when its 13 other checks had been lost while the broker could not reach its group). The checks of a gap
    count only if the windows explain the gap (``UNEXPLAINED_IN_GAP``)."""
    times = sorted(times)
    missing = check_max - len(times)
    if len(times) < 2 or missing <= 0 or not windows:
        return 0
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    cadence = statistics.median(gaps)
    if interval_s and cadence > 1.5 * interval_s:
        cadence = interval_s
    if cadence <= 0:
        return 0
    slack = max((abs(g - cadence) for g in gaps if g < 1.5 * cadence), default=0.0) + CADENCE_SLACK_S
    def lost_in(places: list[float]) -> int:
        return sum(1 for p in places if any(begin - slack <= p <= end + slack for begin, end in windows))

    lost = lost_in([p for p in (times[0] - k * cadence for k in range(1, missing + 1)) if p >= born])
    lost += lost_in([times[-1] + k * cadence for k in range(1, missing + 1)])
    for t, gap in zip(times, gaps, strict=False):
        inside = [t + k * cadence for k in range(1, round(gap / cadence))]
        found = lost_in(inside)
        if len(inside) - found <= UNEXPLAINED_IN_GAP:  # else the endpoint was not checking at the cadence
            lost += found
    return min(lost, missing)


def checks_lost_unheard(times: list[float], born: float, check_max: int, windows: list[Window],
                        interval_s: float) -> int:
    """How many of the ``check_max - len(times)`` checks a client did not see may have been made in the
    unheard ``windows`` while the transaction was alive: a window counts if it ends after the half was
    born and no seen check came after it (the endpoint still reached the producers then), and holds one
    check per ``interval_s`` of its length, plus one. Missing checks placed in a window by the seen
    checks' cadence (``checks_lost``) count too."""
    missing = check_max - len(times)
    if missing <= 0 or interval_s <= 0:
        return 0
    last_seen = max(times, default=born)
    fit = sum(int((end - max(begin, born)) / interval_s) + 1 for begin, end in windows
              if end > born and last_seen <= end + CADENCE_SLACK_S)
    return max(min(fit, missing), checks_lost(times, born, check_max, windows, interval_s))
