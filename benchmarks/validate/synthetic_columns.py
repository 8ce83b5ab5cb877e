"""The synthetic trace's columns, span by span: the offsets a broker would have assigned, carried from one
span of rows to the next (``Offsets``), and the Arrow table of each span in the trace schema.

What is carried: the seq, half-copy, per-queue and Op counters, each transaction's latest half copy and
real queue offset (a few bytes per transaction: a later span refers to them), and the resolved halves of
an Op record not yet full. Each Op record comes right after the END_TX that fills it, or after the
trace's last END_TX.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txmq.trace import schema as S

TIMEOUT_MS, INTERVAL_MS, CHECK_MAX = 6000, 30_000, 15
QUEUES = 4
OP_BATCH = 100  # halves per Op record
COMMITLOG_STRIDE = 300  # bytes per record in the commit log
EVENT_CODES = {name: i for i, name in enumerate(S.EVENTS)}
ACTION_CODES = {S.COMMIT: 0, S.ROLLBACK: 1, S.UNKNOWN: 2}


@dataclass(frozen=True)
class _Interleaved:
    """The event rows with the Op records slotted in: ``final`` picks, in trace order, from the kept event
    rows followed by the ``n_ops`` Op records."""

    final: np.ndarray
    n_ops: int

    def column(self, values: np.ndarray, fill: int = -1) -> np.ndarray:
        """An event-row column in trace order, ``fill`` on the Op records."""
        return np.concatenate([values, np.full(self.n_ops, fill, values.dtype)])[self.final]


def _strings(values: list[str], index: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A string column from a small dictionary, null where not ``valid``."""
    dictionary = pa.array(values)
    codes = pa.array(np.where(valid, index, 0).astype(np.int32), mask=~valid)
    return pa.DictionaryArray.from_arrays(codes, dictionary).cast(pa.string())


def _int(values: np.ndarray, valid: np.ndarray, typ: pa.DataType | None = None) -> pa.Array:
    return pa.array(values, mask=~valid).cast(typ or pa.int64())


def _txn_ids(txn: np.ndarray, valid: np.ndarray) -> pa.Array:
    """Transaction ids ``t0000042`` (at least seven digits), null where not ``valid``."""
    digits = pc.utf8_lpad(pa.array(np.where(valid, txn, 0)).cast(pa.string()), 7, "0")
    ids = pc.binary_join_element_wise("t", digits, "")
    return pc.if_else(pa.array(valid), ids, pa.scalar(None, pa.string()))


class Offsets:
    """The offsets carried from span to span, and each span's table (``table``); ``end_txs`` is how many
    END_TX rows the whole trace has."""

    def __init__(self, n: int, end_txs: int) -> None:
        self.seq = self.copies = self.ops = self.ends = 0
        self.end_txs = end_txs
        self.queues = np.zeros(QUEUES, np.int64)
        self.latest_copy = np.full(n, -1, np.int64)  # per txn
        self.real_offset = np.full(n, -1, np.int64)  # per txn
        self.open_op = np.empty(0, np.int64)  # resolved halves of the Op record being filled
        self.last_ts = self.last_half = -1

    def half_offsets(self, ev: np.ndarray, tx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Half offsets in seq order; every other event of a txn refers to its latest copy. Returns each
        row's current copy and the copy before it (what a HALF_RENEW renewed); -1 before any copy."""
        m = len(tx)
        is_copy = (ev == EVENT_CODES[S.HALF_PUT]) | (ev == EVENT_CODES[S.HALF_RENEW])
        copy_off = self.copies + np.cumsum(is_copy) - 1
        self.copies += int(np.count_nonzero(is_copy))
        by_txn = np.lexsort((np.arange(m), tx))
        txs = tx[by_txn]
        first = np.ones(m, bool)
        first[1:] = txs[1:] != txs[:-1]
        before = self.latest_copy[txs]  # each transaction's latest copy in the spans before
        own = np.where(is_copy[by_txn], copy_off[by_txn], -1)
        latest = np.where(first & (own < 0), before, own)
        # forward fill within each transaction: the last copy at or before each event
        idx = np.where((latest >= 0) | first, np.arange(m), 0)
        np.maximum.accumulate(idx, out=idx)
        current_sorted = latest[idx]
        last = np.append(first[1:], True)
        self.latest_copy[txs[last]] = current_sorted[last]
        current, prev = np.empty(m, np.int64), np.empty(m, np.int64)
        current[by_txn] = current_sorted
        prev[by_txn] = np.where(first, before, np.concatenate([[-1], current_sorted[:-1]]))
        return current, prev

    def queue_offsets(self, ev: np.ndarray, tx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Real queue offsets per queue in seq order; DELIVER takes its txn's REAL_PUT offset. Returns the
        offsets and which rows to keep (not a DELIVER whose REAL_PUT was cut)."""
        queue = tx % QUEUES
        is_real = ev == EVENT_CODES[S.REAL_PUT]
        qoff = np.full(len(tx), -1, np.int64)
        for q in range(QUEUES):
            m = is_real & (queue == q)
            puts = int(np.count_nonzero(m))
            qoff[m] = self.queues[q] + np.arange(puts)
            self.queues[q] += puts
        self.real_offset[tx[is_real]] = qoff[is_real]
        is_deliver = ev == EVENT_CODES[S.DELIVER]
        qoff[is_deliver] = self.real_offset[tx[is_deliver]]
        return qoff, ~is_deliver | (qoff >= 0)

    def op_records(self, ev: np.ndarray, current: np.ndarray) -> tuple[list[np.ndarray], list[int]]:
        """Op records: resolved halves in END_TX order, OP_BATCH per record, right after the END_TX that
        fills the record (or the trace's last). Returns each record's half offsets and the row it follows."""
        ends = np.flatnonzero(ev == EVENT_CODES[S.END_TX])
        number = self.ends + np.arange(1, len(ends) + 1)  # in the whole trace
        closing = np.flatnonzero((number % OP_BATCH == 0) | (number == self.end_txs))
        halves = np.concatenate([self.open_op, current[ends]])
        batches: list[np.ndarray] = []
        op_after: list[int] = []
        start = 0
        for j in closing.tolist():
            stop = len(self.open_op) + j + 1
            batches.append(halves[start:stop])
            op_after.append(int(ends[j]))
            start = stop
        self.open_op, self.ends = halves[start:], self.ends + len(ends)
        return batches, op_after

    def table(self, cols: dict[str, np.ndarray]) -> pa.Table:
        """The span's rows (``span_rows``) with its Op records, in the trace schema."""
        ev, tx = cols["event"], cols["txn"]
        current, prev = self.half_offsets(ev, tx)
        qoff, keep = self.queue_offsets(ev, tx)
        batches, op_after = self.op_records(ev, current)
        position = np.concatenate([np.arange(len(keep)) * 2, np.asarray(op_after, np.int64) * 2 + 1])
        final = np.argsort(position, kind="stable")
        keep_all = np.concatenate([keep, np.ones(len(op_after), bool)])[final]
        rows = _Interleaved(final[keep_all], len(op_after))
        table = _table(cols | {"current": current, "prev": prev, "qoff": qoff}, rows, batches, op_after,
                       self).cast(S.ARROW_SCHEMA)
        self.seq += table.num_rows
        self.ops += len(batches)
        return table

    def end_row(self) -> pa.Table:
        """The ``END`` marker of a clean shutdown (trace format v2), after the last event: nothing
        buffered (strict mode), the half queue's and the Op queue's next offsets, the end of the commit
        log."""
        end: dict[str, object] = {
            "seq": self.seq, "ts": self.last_ts if self.seq else None, "event": S.END, "half_offsets": [],
            "queue_offset": -1 if self.last_half < 0 else self.last_half + 1, "op_offset": self.ops,
            "commitlog_offset": self.seq * COMMITLOG_STRIDE}
        return pa.Table.from_pylist([end], schema=S.ARROW_SCHEMA)


def _table(
    cols: dict[str, np.ndarray], rows: _Interleaved, batches: list[np.ndarray], op_after: list[int],
    at: Offsets,
) -> pa.Table:
    """The trace's columns in schema order, null wherever an event does not carry the value."""
    column = rows.column
    event = column(cols["event"].astype(np.int64), EVENT_CODES[S.OP_PUT])
    txn_col = column(cols["txn"])
    ts_col = np.concatenate([cols["ts"], cols["ts"][np.asarray(op_after, np.int64)]])[rows.final]
    has_txn = event != EVENT_CODES[S.OP_PUT]
    e_is = {name: event == code for name, code in EVENT_CODES.items()}
    answer = e_is[S.LOCAL_TX] & (column(cols["from_check"]) == 1)
    half_ref = (
        e_is[S.HALF_PUT] | e_is[S.HALF_RENEW] | e_is[S.CHECK] | e_is[S.END_TX] | e_is[S.REAL_PUT]
        | e_is[S.DISCARD] | answer
    )
    queue_ev = e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]
    seq = at.seq + np.arange(len(event), dtype=np.int64)
    halves = column(cols["current"])
    if len(event):
        at.last_ts = max(at.last_ts, int(ts_col.max()))
        at.last_half = max(at.last_half, int(halves[half_ref].max(initial=-1)))
    placement = {
        "seq": pa.array(seq),
        "ts": pa.array(ts_col),
        "event": _strings(list(S.EVENTS), event, np.ones(len(event), bool)),
        "txn": _txn_ids(txn_col, has_txn),
        "producer_group": _strings(["pg"], np.zeros(len(event), np.int64), has_txn & ~e_is[S.DELIVER]),
        "producer": _strings(
            ["p1"],
            np.zeros(len(event), np.int64),
            e_is[S.LOCAL_TX] | e_is[S.HALF_PUT] | e_is[S.END_TX] | e_is[S.CHECK],
        ),
        "half_offset": _int(halves, half_ref),
        "prev_half_offset": _int(column(cols["prev"]), e_is[S.HALF_RENEW]),
        "commitlog_offset": _int(seq * COMMITLOG_STRIDE, ~e_is[S.LOCAL_TX]),
        "topic": _strings(
            ["T", "TRANS_CHECK_MAX_TIME_TOPIC"],
            e_is[S.DISCARD].astype(np.int64),
            queue_ev | e_is[S.DISCARD],
        ),
        "queue_id": _int(
            np.where(e_is[S.OP_PUT], 0, txn_col % QUEUES), queue_ev | e_is[S.OP_PUT], pa.int32()
        ),
        "queue_offset": _int(column(cols["qoff"]), e_is[S.REAL_PUT] | e_is[S.DELIVER]),
    }
    producer_side = {  # trace v2: the producer's born time (no clock skew here), no check immunity,
        # no delayed or FIFO message
        "born_ts": _int(ts_col, e_is[S.HALF_PUT]),
        "immunity": pa.nulls(len(event), pa.string()),
        "deliver_ms": pa.nulls(len(event), pa.int64()),
        "message_group": pa.nulls(len(event), pa.string()),
    }
    outcome = _outcome_columns(cols, rows, e_is, answer, txn_col, batches, at.ops)
    return pa.table(placement | outcome | producer_side)


def _op_lists(is_op: np.ndarray, batches: list[np.ndarray]) -> pa.Array:
    """The Op records' half offsets, in order, on the rows ``is_op``; null elsewhere."""
    sizes = np.zeros(len(is_op), np.int64)
    sizes[is_op] = [len(b) for b in batches]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    values = np.concatenate(batches) if batches else np.empty(0, np.int64)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int64()), mask=pa.array(~is_op))


def _outcome_columns(
    cols: dict[str, np.ndarray],
    rows: _Interleaved,
    e_is: dict[str, np.ndarray],
    answer: np.ndarray,
    txn_col: np.ndarray,
    batches: list[np.ndarray],
    ops_before: int,
) -> dict[str, pa.Array]:
    """The columns after ``queue_offset``: what each event decided, counted or covered."""
    column = rows.column
    counted = e_is[S.HALF_RENEW] | e_is[S.CHECK] | e_is[S.DISCARD] | answer
    result_codes = np.select(
        [e_is[S.END_TX], e_is[S.HALF_RENEW], e_is[S.CHECK], e_is[S.DISCARD]], [0, 1, 2, 3], -1
    )
    crc = (txn_col * 2654435761) % (2**31)
    rows_n = len(txn_col)
    return {
        "action": _strings(
            [S.COMMIT, S.ROLLBACK, S.UNKNOWN], column(cols["action"]).clip(0), column(cols["action"]) >= 0
        ),
        "from_check": pa.array(column(cols["from_check"]) == 1, mask=column(cols["from_check"]) < 0),
        "result": _strings(
            [S.OK, S.RENEW_FOR_CHECK, S.CHECK_SENT, S.DISCARD_CHECK_MAX],
            result_codes.clip(0),
            result_codes >= 0,
        ),
        "check_count": _int(column(cols["check_count"]), counted, pa.int32()),
        "op_offset": _int(ops_before + np.cumsum(e_is[S.OP_PUT]) - 1, e_is[S.OP_PUT]),
        "half_offsets": _op_lists(e_is[S.OP_PUT], batches),
        "consumer_group": _strings(["cg1"], np.zeros(rows_n, np.int64), e_is[S.DELIVER]),
        "body_crc": _int(crc, e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]),
        "attempt": pa.nulls(rows_n, pa.int32()),  # pull deliveries only
    }
