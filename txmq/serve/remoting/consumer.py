"""The consumer's requests: pulls with long polling, offsets, the group's members, retries.

A pull follows ``PullMessageProcessor``: the commit offset the consumer carries is stored first (sysflag
bit 0), an offset outside the queue answers PULL_OFFSET_MOVED with where to go, messages found answer
SUCCESS with the records in upstream's layout, and nothing found waits (sysflag bit 1, up to the request's
``suspendTimeoutMillis``) for a message to arrive, as ``PullRequestHoldService`` does, then answers
PULL_NOT_FOUND. Tag filters are applied by the client, as the Java and C++ clients do on every pull; an
SQL92 filter by the broker (``txmq.serve.remoting.filters``): a pull whose messages it all refuses answers
PULL_RETRY_IMMEDIATELY with where to read next.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from txmq.protocol import Message
from txmq.serve.remoting import codes
from txmq.serve.remoting.connection import Connection
from txmq.serve.remoting.frame import Command
from txmq.serve.remoting.message import PROPERTY_RECONSUME_TIME, encode_record
from txmq.serve.remoting.producer import DLQ_PREFIX, RETRY_PREFIX, Refusal, RemotingContext, header_int
from txmq.transaction.constants import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, RESERVED_PROPERTIES

FLAG_COMMIT_OFFSET = 0x1  # PullSysFlag
FLAG_SUSPEND = 0x2
MAX_PULL_BATCH = 32  # MessageStoreConfig.maxTransferCountOnMessageInMemory
MAX_PULL_BYTES = 256 * 1024  # maxTransferBytesOnMessageInMemory: an answer stays far below a frame's limit
MAX_SUSPEND_MS = 30_000
# MessageStoreConfig.maxFilterMessageSize (16000 bytes) over a consume-queue entry's 20: how far a filtered
# pull reads on past messages its filter refuses
MAX_FILTER_SCAN = 16_000 // 20
HOLD_CHECK_S = 0.5  # a held pull looks again this often even if nothing woke it (gRPC sends, checks)
DEFAULT_MAX_RECONSUME = 16  # SubscriptionGroupConfig.retryMaxTimes
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"  # MessageConst
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"


@dataclass
class HeldPull:
    """A pull waiting for messages."""

    connection: Connection
    command: Command
    deadline: float


class PullHold:
    """``PullRequestHoldService``: held pulls, answered when a message arrives or their time is up."""

    def __init__(self, ctx: RemotingContext) -> None:
        self.ctx = ctx
        self._held: list[HeldPull] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="txmq-remoting-hold", daemon=True)

    def start(self) -> PullHold:
        self._thread.start()
        return self

    def hold(self, held: HeldPull) -> None:
        with self._lock:
            self._held.append(held)

    def arrived(self) -> None:
        """A message became visible: look at the held pulls now."""
        self._wake.set()

    def stop(self) -> None:
        """Shutdown: every held pull is answered PULL_NOT_FOUND."""
        self._stop.set()
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(HOLD_CHECK_S)
            self._wake.clear()
            with self._lock:
                held, self._held = self._held, []
            now = time.monotonic()
            waiting = []
            for item in held:
                last = self._stop.is_set() or now >= item.deadline or not item.connection.active
                try:
                    answer = pull_once(self.ctx, item.command, final=last)
                except Exception as exc:  # the broker closed under a held pull, or a bug: answer, go on
                    answer = item.command.response(codes.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
                if answer is None:
                    waiting.append(item)
                else:
                    item.connection.send(answer)
            with self._lock:
                self._held.extend(waiting)


def pull(ctx: RemotingContext, hold: PullHold, conn: Connection, cmd: Command) -> Command | None:
    """PULL_MESSAGE: answered now, or held (None) until a message arrives or the suspend time is up."""
    ext = cmd.ext
    group, topic = ext.get("consumerGroup", ""), ext.get("topic", "")
    queue_id = header_int(ext, "queueId")
    if not 0 <= queue_id < ctx.queues(topic):
        raise Refusal(codes.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal, topic:[{topic}]")
    sysflag = header_int(ext, "sysFlag", 0)
    commit = header_int(ext, "commitOffset", -1)
    if sysflag & FLAG_COMMIT_OFFSET and commit >= 0:
        ctx.serve.broker.commit_consumer_offset(group, topic, queue_id, commit, conn.name)
    suspend = sysflag & FLAG_SUSPEND
    answer = pull_once(ctx, cmd, final=not suspend)
    if answer is None:
        wait_ms = min(header_int(ext, "suspendTimeoutMillis", 15_000), MAX_SUSPEND_MS)
        hold.hold(HeldPull(conn, cmd, time.monotonic() + wait_ms / 1000))
    return answer


def pull_once(ctx: RemotingContext, cmd: Command, final: bool) -> Command | None:
    """One look at the queue: the answer, or None when nothing is there and the pull may wait."""
    ext = cmd.ext
    group, topic = ext.get("consumerGroup", ""), ext.get("topic", "")
    queue_id, offset = header_int(ext, "queueId"), header_int(ext, "queueOffset")
    try:  # before the queue is read, as PullMessageProcessor refuses a filter before getMessage
        accept = ctx.filters.pull_filter(ext, header_int(ext, "sysFlag", 0))
    except Refusal as exc:
        return cmd.response(exc.code, remark=exc.remark)
    broker = ctx.serve.broker
    low, high = broker.admin.min_offset(topic, queue_id), broker.max_offset(topic, queue_id)
    bounds = {"minOffset": str(low), "maxOffset": str(high), "suggestWhichBrokerId": "0"}
    if offset < low or offset > high:  # OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY
        moved = low if offset < low else high
        return cmd.response(codes.PULL_OFFSET_MOVED, {**bounds, "nextBeginOffset": str(moved)},
                            remark="the offset is outside the queue")
    if offset == high:
        if not final:
            return None
        return cmd.response(codes.PULL_NOT_FOUND, {**bounds, "nextBeginOffset": str(offset)},
                            remark="no new message")
    count = min(max(header_int(ext, "maxMsgNums", MAX_PULL_BATCH), 1), MAX_PULL_BATCH)
    result = broker.pull_messages(group, topic, queue_id, offset, count, accept, MAX_FILTER_SCAN)
    if not result.messages and accept is not None:  # GetMessageStatus.NO_MATCHED_MESSAGE
        return cmd.response(codes.PULL_RETRY_IMMEDIATELY,
                            {**bounds, "nextBeginOffset": str(result.next_offset)}, remark="no matched msg")
    records: list[bytes] = []
    next_offset = result.next_offset
    for message in result.messages:
        if records and sum(map(len, records)) >= MAX_PULL_BYTES:
            next_offset = message.queue_offset  # the rest comes with the next pull
            break
        records.append(encode_record(message, ctx.store_host, ctx.store_host))
    body = b"".join(records)
    return cmd.response(codes.SUCCESS, {**bounds, "nextBeginOffset": str(next_offset)}, body=body)


def query_offset(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``ConsumerManageProcessor.queryConsumerOffset``: a group that never committed reads 0 from a queue
    that never held a message (``checkInMemByConsumeOffset`` finds nothing at 0) and QUERY_NOT_FOUND
    otherwise (txmq's queues are all "in memory"), and then starts where its ConsumeFromWhere says."""
    ext = cmd.ext
    topic, queue_id = ext.get("topic", ""), header_int(ext, "queueId")
    broker = ctx.serve.broker
    offset = broker.consumer_offset(ext.get("consumerGroup", ""), topic, queue_id)
    if offset is None and broker.max_offset(topic, queue_id) == 0:
        offset = 0
    if offset is None:
        return cmd.response(codes.QUERY_NOT_FOUND, remark="Not found, maybe this group consumer boot first")
    return cmd.response(codes.SUCCESS, {"offset": str(offset)})


def update_offset(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command | None:
    """``ConsumerManageProcessor.updateConsumerOffset`` (usually one-way)."""
    ext = cmd.ext
    ctx.serve.broker.commit_consumer_offset(ext.get("consumerGroup", ""), ext.get("topic", ""),
                                            header_int(ext, "queueId"), header_int(ext, "commitOffset"),
                                            conn.name)
    return None if cmd.oneway else cmd.response(codes.SUCCESS)


def max_offset(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``AdminBrokerProcessor.getMaxOffset``."""
    topic, queue_id = cmd.ext.get("topic", ""), header_int(cmd.ext, "queueId")
    ctx.queues(topic)
    return cmd.response(codes.SUCCESS, {"offset": str(ctx.serve.broker.max_offset(topic, queue_id))})


def min_offset(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``AdminBrokerProcessor.getMinOffset``."""
    topic, queue_id = cmd.ext.get("topic", ""), header_int(cmd.ext, "queueId")
    ctx.queues(topic)
    return cmd.response(codes.SUCCESS, {"offset": str(ctx.serve.broker.admin.min_offset(topic, queue_id))})


def search_offset(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``AdminBrokerProcessor.searchOffsetByTimestamp``: the first offset stored at or after the time
    (the queue's end when none is), by bisection over store timestamps."""
    topic, queue_id = cmd.ext.get("topic", ""), header_int(cmd.ext, "queueId")
    stamp = header_int(cmd.ext, "timestamp")
    ctx.queues(topic)
    admin = ctx.serve.broker.admin
    low, high = admin.min_offset(topic, queue_id), ctx.serve.broker.max_offset(topic, queue_id)
    while low < high:
        middle = (low + high) // 2
        found = admin.read(topic, queue_id, middle, 1)
        if found and found[0].store_timestamp < stamp:
            low = middle + 1
        else:
            high = middle
    return cmd.response(codes.SUCCESS, {"offset": str(low)})


def consumer_list(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``ConsumerManageProcessor.getConsumerListByGroup``."""
    group = cmd.ext.get("consumerGroup", "")
    ids = ctx.clients.consumer_ids(group)
    if not ids:
        return cmd.response(codes.SYSTEM_ERROR, remark=f"no consumer for this group, {group}")
    return cmd.response(codes.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())


def send_back(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``AbstractSendMessageProcessor.consumerSendMsgBack``: the message goes to the group's retry topic
    with its reconsume count one higher, or to ``%DLQ%<group>`` once the count reaches the maximum (or
    the delay level is negative). txmq has no scheduled delivery: the retry is visible at once."""
    ext = cmd.ext
    group = ext.get("group", "")
    stored = ctx.serve.broker.admin.message(header_int(ext, "offset"))
    if stored is None:
        return cmd.response(codes.SYSTEM_ERROR, remark=f"look message by offset failed, {ext.get('offset')}")
    props = stored.properties
    times = int(props.get(PROPERTY_RECONSUME_TIME, "0"))
    maximum = header_int(ext, "maxReconsumeTimes", DEFAULT_MAX_RECONSUME)
    dead = times >= maximum or header_int(ext, "delayLevel", 0) < 0
    user = {k: v for k, v in props.items() if k not in RESERVED_PROPERTIES}
    user.setdefault(PROPERTY_RETRY_TOPIC, stored.topic)
    user.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, ext.get("originMsgId") or props.get(PROPERTY_UNIQ_KEY, ""))
    user[PROPERTY_RECONSUME_TIME] = str(times + 1)
    topic = (DLQ_PREFIX if dead else RETRY_PREFIX) + group
    copy = Message(topic=topic, body=stored.body, tags=props.get(PROPERTY_TAGS),
                   keys=props.get(PROPERTY_KEYS), properties=user)
    ctx.serve.broker.send_message(copy, props.get(PROPERTY_UNIQ_KEY) or str(stored.commitlog_offset))
    ctx.arrived()
    return cmd.response(codes.SUCCESS)
