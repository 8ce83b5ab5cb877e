"""The DuckDB baseline: every check and outcome Spark judges, over the same Parquet trace.

This is what a user might run instead of Spark, so the benchmark compares Spark's time with it; it counts
violations per check id in the same units as Spark (per transaction, Op record or queue position), and
the transactions showing each outcome. The invariants Spark states in SQL are three queries here; what
Spark hands to Python judges (the outcomes, over the transactions with a telling event, and the
consumer groups, in seq order) DuckDB selects the same way and hands to the same judges. Counts only:
which violations rocketmq mode explains, samples and metrics are reporting on top.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_validation.groups import GROUP_PASS_EVENTS
from spark_validation.outcomes import COLUMNS as OUTCOME_COLUMNS
from spark_validation.outcomes import EVENTS as OUTCOME_EVENTS
from spark_validation.outcomes import OUTCOME_IDS, judged
from txmq.checks.consumer_groups import judge_groups
from txmq.trace import schema as S
from txmq.trace.outcomes import TELLING

if TYPE_CHECKING:
    import duckdb

MEMORY_LIMIT = "3GB"
# Per transaction: every check judged on one transaction's events, in the order of PER_TXN_CHECKS.
_PER_TXN_SQL = """
    WITH seqd AS (
      SELECT txn, seq, event, check_count, result, half_offset, prev_half_offset,
        sum(CASE WHEN event = 'HALF_RENEW' AND result = 'RESUME' THEN 1 ELSE 0 END)
          OVER (PARTITION BY txn ORDER BY seq) AS segment
      FROM ev WHERE event IN ('CHECK', 'HALF_RENEW', 'DISCARD', 'REAL_PUT')),
    kinds AS (
      SELECT *, CASE WHEN event = 'HALF_RENEW' AND result = 'RESUME' THEN 'Z' WHEN event = 'HALF_RENEW'
                     THEN 'R' WHEN event = 'CHECK' THEN 'C' ELSE 'O' END AS kind
      FROM seqd),
    copies AS (SELECT txn, half_offset, seq, check_count AS n FROM kinds WHERE kind IN ('R', 'Z')),
    counted AS (  -- CheckBound's count rule (txmq/checks/check_bound.py): the count of the copy renewed
      SELECT k.*,  -- (R) or checked (C), an original half counting 0, and the previous renewal's count
        coalesce((SELECT arg_max(c.n, c.seq) FROM copies c WHERE c.txn = k.txn AND c.seq < k.seq
                  AND c.half_offset = CASE WHEN k.kind = 'R' THEN k.prev_half_offset ELSE k.half_offset END),
                 0) AS copy_n,
        coalesce(lag(check_count) OVER (PARTITION BY txn, segment, kind ORDER BY seq), 0) AS last_n
      FROM kinds k),
    ordered AS (
      SELECT txn,
        bool_or(CASE WHEN kind = 'Z' THEN check_count != 0
                     WHEN kind = 'R' THEN check_count > {check_max} OR check_count != copy_n + 1
                     WHEN kind = 'C' THEN check_count != copy_n
                     ELSE false END) AS broken,
        bool_or(kind = 'R' AND check_count = copy_n + 1 AND check_count != last_n + 1) AS several,
        bool_or(event = 'REAL_PUT' AND coalesce(last_discard, -1) > coalesce(last_resume, -1))
          AS after_discard
      FROM (
        SELECT *,
          max(CASE WHEN event = 'DISCARD' THEN seq END) OVER w AS last_discard,
          max(CASE WHEN kind = 'Z' THEN seq END) OVER w AS last_resume
        FROM counted WINDOW w AS (PARTITION BY txn ORDER BY seq ROWS UNBOUNDED PRECEDING))
      GROUP BY txn),
    facts AS (
      SELECT txn,
        min(ts) FILTER (WHERE event = 'HALF_PUT') AS born,
        arg_min(born_ts, seq) FILTER (WHERE event = 'HALF_PUT') AS born_at,
        min(seq) AS min_seq, max(seq) AS max_seq,
        min(seq) FILTER (WHERE event = 'LOCAL_TX' AND action = 'COMMIT') AS local_commit_seq,
        count(*) FILTER (WHERE event = 'LOCAL_TX' AND action = 'ROLLBACK') AS local_rollbacks,
        count(*) FILTER (WHERE event = 'END_TX' AND result = 'OK') AS oks,
        min(seq) FILTER (WHERE event = 'END_TX' AND result = 'OK' AND action = 'COMMIT') AS commit_ok_seq,
        count(*) FILTER (WHERE event = 'END_TX' AND result = 'OK' AND action IN ('COMMIT', 'ROLLBACK'))
          AS resolutions,
        count(*) FILTER (WHERE event = 'REAL_PUT') AS reals,
        min(seq) FILTER (WHERE event = 'REAL_PUT') AS real_seq,
        count(*) FILTER (WHERE event = 'DISCARD') AS discards,
        count(*) FILTER (WHERE event = 'DISCARD' AND NOT ((result = 'CHECK_MAX' AND check_count = {check_max})
                                                          OR result = 'RETENTION')) AS bad_discards,
        count(*) FILTER (WHERE event = 'HALF_RENEW' AND result = 'IMMUNITY') AS immunity,
        count(*) FILTER (WHERE event = 'CHECK') AS checks,
        min(ts) FILTER (WHERE event = 'CHECK') AS first_check_ts
      FROM ev WHERE txn IS NOT NULL AND event != 'DELIVER' GROUP BY txn),
    positions AS (
      SELECT topic, queue_id, queue_offset, arg_min(txn, seq) AS r_txn
      FROM ev WHERE event = 'REAL_PUT' GROUP BY ALL),
    undelivered AS (
      SELECT p.r_txn AS txn, count(*) AS missing
      FROM positions p JOIN subs s USING (topic)
      WHERE NOT EXISTS (SELECT 1 FROM ev d WHERE d.event = 'DELIVER' AND d.consumer_group = s.consumer_group
                        AND d.topic = p.topic AND d.queue_id = p.queue_id AND d.queue_offset = p.queue_offset)
      GROUP BY ALL),
    j AS (
      SELECT f.*, o.broken, o.several, o.after_discard, coalesce(u.missing, 0) AS missing,
        f.born IS NOT NULL AND f.born < {judged_before} AS judged
      FROM facts f LEFT JOIN ordered o USING (txn) LEFT JOIN undelivered u USING (txn))
    SELECT
      count(*) FILTER (WHERE reals > 0 AND (commit_ok_seq IS NULL OR real_seq < commit_ok_seq)),
      count(*) FILTER (WHERE reals > 0 AND (local_commit_seq IS NULL OR local_commit_seq > real_seq)),
      count(*) FILTER (WHERE reals > 0 AND local_rollbacks > 0),
      count(*) FILTER (WHERE oks > 1),
      count(*) FILTER (WHERE reals > 1),
      count(*) FILTER (WHERE coalesce(broken, false) OR coalesce(several, false)),
      count(*) FILTER (WHERE checks > 0 AND immunity = 0
                             AND (born IS NULL OR first_check_ts - coalesce(born_at, born)
                                                  BETWEEN 0 AND {timeout})),
      count(*) FILTER (WHERE bad_discards > 0 OR coalesce(after_discard, false)),
      count(*) FILTER (WHERE judged AND resolutions + discards = 0),
      count(*) FILTER (WHERE judged AND missing > 0)
    FROM j"""
PER_TXN_CHECKS = (
    "NoUncommittedVisible",
    "CommitMatchesLocal",
    "RollbackNeverVisible",
    "SingleResolution",
    "NoDuplicateReal",
    "CheckBound",
    "CheckAfterTimeout",
    "DiscardOnlyAtMax",
    "EventuallyResolved",
    "EventuallyDelivered",
)
# Per Op record, in the order of OP_CHECKS.
OP_CHECKS = ("OpRefersToHalf", "NoCheckAfterDurableOp")
_OPS_SQL = """
    WITH covered AS (
      SELECT off, min(seq) AS op_seq, count(*) AS entries
      FROM (SELECT seq, unnest(half_offsets) AS off FROM ev WHERE event = 'OP_PUT') GROUP BY off),
    copies AS (SELECT half_offset AS off, seq AS put_seq, prev_half_offset AS prev, txn FROM ev
               WHERE event IN ('HALF_PUT', 'HALF_RENEW')),
    refs AS (SELECT count(*) FILTER (WHERE put_seq IS NULL OR put_seq > op_seq OR entries > 1) AS n
             FROM covered LEFT JOIN copies USING (off)),
    checks AS (SELECT c.seq AS check_seq, c.half_offset AS off, r.prev FROM ev c
               LEFT JOIN copies r ON r.off = c.half_offset AND r.prev IS NOT NULL WHERE c.event = 'CHECK'),
    concerned AS (SELECT check_seq, off FROM checks UNION ALL
                  SELECT check_seq, prev FROM checks WHERE prev IS NOT NULL),
    late AS (SELECT check_seq, min(op_seq) AS op_seq FROM concerned JOIN covered USING (off)
             GROUP BY check_seq)
    SELECT (SELECT n FROM refs), (SELECT count(*) FROM late l JOIN checks k USING (check_seq)
                                  WHERE l.op_seq < k.check_seq)"""
# The consumer-group checks are not queries: the group events go through the judge in
# txmq.checks.consumer_groups in seq order, as in Spark's pass 5; a trace without any is not judged (0).
GROUP_CHECKS = ("DuplicateConsumptionExplained", "GroupSkipsNothing", "DeadLetterOnlyAtMax")

# Per queue position, in the order of QUEUE_CHECKS, then DELIVERs of nothing put (NoUncommittedVisible's).
QUEUE_CHECKS = ("QueueContiguity", "DeliveryIntegrity", "NotBeforeDeliveryTime", "MessageGroupOrder")
_QUEUES_SQL = """
    WITH positions AS (
      SELECT topic, queue_id, queue_offset, count(*) AS reals, arg_min(seq, seq) AS r_seq,
             arg_min(txn, seq) AS r_txn, arg_min(body_crc, seq) AS r_crc
      FROM ev WHERE event = 'REAL_PUT' GROUP BY ALL),
    gaps AS (SELECT count(*) FILTER (WHERE reals > 1 OR gap != 0) AS n FROM (
               SELECT reals, queue_offset - coalesce(lag(queue_offset) OVER
                 (PARTITION BY topic, queue_id ORDER BY queue_offset), -1) - 1 AS gap FROM positions)),
    deliveries AS (
      SELECT consumer_group, topic, queue_id, queue_offset, min(seq) AS d_seq, min(txn) AS d_txn,
             max(txn) AS d_txn_max, min(body_crc) AS d_crc, max(body_crc) AS d_crc_max
      FROM ev WHERE event = 'DELIVER' GROUP BY ALL),
    joined AS (
      SELECT d.*, p.r_seq, p.r_txn, p.r_crc,
        lag(d.queue_offset) OVER (PARTITION BY consumer_group, d.topic, d.queue_id ORDER BY d_seq)
          > d.queue_offset AS out_of_order
      FROM deliveries d LEFT JOIN positions p USING (topic, queue_id, queue_offset)),
    due AS (SELECT topic, queue_id, queue_offset, arg_min(deliver_ms, seq) AS due_ms FROM ev
            WHERE event IN ('REAL_PUT', 'PLAIN_PUT') GROUP BY ALL),
    early AS (SELECT count(*) AS n FROM ev d JOIN due USING (topic, queue_id, queue_offset)
              WHERE d.event = 'DELIVER' AND d.ts < due.due_ms),
    back AS (SELECT count(*) FILTER (WHERE queue_offset < before AND attempt > 1) AS n FROM (
               SELECT queue_offset, attempt, max(queue_offset) OVER (PARTITION BY consumer_group, topic,
                 queue_id, message_group ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                 AS before
               FROM ev WHERE event = 'DELIVER' AND message_group IS NOT NULL))
    SELECT (SELECT n FROM gaps),
      count(*) FILTER (WHERE (r_seq IS NOT NULL AND (d_txn != r_txn OR d_txn_max != r_txn
             OR d_crc IS DISTINCT FROM r_crc OR d_crc_max IS DISTINCT FROM r_crc))
             OR coalesce(out_of_order, false)),
      (SELECT n FROM early), (SELECT n FROM back),
      count(*) FILTER (WHERE r_seq IS NULL OR r_seq > d_seq)
    FROM joined"""


def _one_row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The single row of an aggregate query (which always returns exactly one)."""
    rows = con.execute(sql).fetchall()  # fetched to the end: the connection's result is done with
    assert len(rows) == 1, "an aggregate query returns one row"
    return tuple(rows[0])


def _connect(path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """A connection with the trace as view ``ev`` and the subscriptions (group, topic) as table ``subs``."""
    import duckdb

    groups = config.get("consumer_groups") or {}
    subs = [(g, t) for g, topics in groups.items() for t in topics] or [("", "")]
    # Bounded memory on a shared machine: DuckDB spills what does not fit (a 10^7-transaction trace's
    # joins and windows) to a temporary directory, instead of taking 80 % of the RAM by default.
    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "temp_directory": tempfile.gettempdir(),
                                 "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    con.execute(f"CREATE VIEW ev AS SELECT * FROM read_parquet('{path}')")
    con.execute("CREATE TEMP TABLE subs(consumer_group VARCHAR, topic VARCHAR)")
    con.executemany("INSERT INTO subs VALUES (?, ?)", subs)
    return con


def _per_txn_sql(con: duckdb.DuckDBPyConnection, config: dict[str, Any]) -> str:
    """The per-transaction query for this trace's settings; liveness judges what was born a horizon
    before the trace's last event."""
    timeout, check_max = config["transaction_timeout_ms"], config["check_max"]
    horizon = timeout + (check_max + 2) * config["check_interval_ms"]
    last_ts = _one_row(con, "SELECT max(ts) FROM ev")[0]
    return _PER_TXN_SQL.format(timeout=timeout, check_max=check_max, judged_before=last_ts - horizon)


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> Iterator[dict[str, Any]]:
    """The query's rows as dicts, an Arrow batch at a time."""
    for batch in con.sql(sql).fetch_arrow_reader():
        yield from batch.to_pylist()


def _outcomes(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Transactions showing each outcome: those with a telling event, their events in seq order, through
    the judges (as Spark's pass 6)."""
    tells = " OR ".join("(" + " AND ".join(f"{k} = '{v}'" for k, v in fields.items()) + ")"
                        for fields in TELLING)
    events = ", ".join(f"'{e}'" for e in OUTCOME_EVENTS)
    sql = f"""
        WITH rows AS (SELECT {", ".join(OUTCOME_COLUMNS)} FROM ev WHERE event IN ({events}))
        SELECT txn, list(struct_pack({", ".join(OUTCOME_COLUMNS)}) ORDER BY seq) AS events
        FROM rows SEMI JOIN (SELECT DISTINCT txn FROM rows WHERE {tells}) USING (txn) GROUP BY txn"""
    shown = Counter(dict.fromkeys(OUTCOME_IDS, 0))
    for row in _dicts(con, sql):  # one row per transaction: counted once per outcome it shows
        shown.update({name for name, _ in judged(row["events"])})
    return dict(shown)


def _groups(con: duckdb.DuckDBPyConnection, config: dict[str, Any]) -> dict[str, int]:
    """The consumer-group checks' violations, judged in seq order (as Spark's pass 5); 0 each, not
    judged, in a trace without group events."""
    kinds = ", ".join(f"'{e}'" for e in S.GROUP_EVENTS)
    if not _one_row(con, f"SELECT count(*) FROM ev WHERE event IN ({kinds})")[0]:
        return dict.fromkeys(GROUP_CHECKS, 0)
    wanted = ", ".join(f"'{e}'" for e in GROUP_PASS_EVENTS)
    verdict = judge_groups(_dicts(con, f"SELECT * FROM ev WHERE event IN ({wanted}) ORDER BY seq"),
                           config.get("consumer_groups") or {}, int(config.get("max_reconsume_times", 16)))
    return {name: len(verdict.problems.get(name, [])) for name in GROUP_CHECKS}


def duckdb_checks(path: Path, header: S.TraceHeader) -> dict[str, int]:
    """The same checks and outcomes in DuckDB; violation counts per check id (same counting units as
    Spark), and transactions per outcome. ``tests/test_catalogue.py`` holds the lists of check ids to the
    catalogue's Spark layer."""
    con = _connect(path, header.config)
    counts = dict(zip(PER_TXN_CHECKS, _one_row(con, _per_txn_sql(con, header.config)), strict=True))
    counts |= dict(zip(OP_CHECKS, _one_row(con, _OPS_SQL), strict=True))
    *per_position, unput = _one_row(con, _QUEUES_SQL)
    counts |= dict(zip(QUEUE_CHECKS, per_position, strict=True))
    counts["NoUncommittedVisible"] += unput
    return counts | _groups(con, header.config) | _outcomes(con)
