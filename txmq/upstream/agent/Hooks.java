package txmq.agent;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;

import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.client.ClientChannelInfo;
import org.apache.rocketmq.broker.client.ProducerGroupEvent;
import org.apache.rocketmq.broker.client.ProducerManager;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.AppendMessageStatus;
import org.apache.rocketmq.store.MessageStore;

/**
 * What the instrumented methods call (see {@link Agent#TARGETS}); each names upstream's class and method.
 * The values are upstream's own: offsets from the store's append result, properties from the messages,
 * END_TX's request from its header fields and its result from the response. A producer is named by its
 * connection's remote address (checks go to a channel; through the 5.x proxy the proxy is the producer).
 * A hook never throws into the broker: what fails is reported on standard error.
 */
public final class Hooks {
    static final String HALF = "RMQ_SYS_TRANS_HALF_TOPIC";
    static final String OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
    static final String CHECK_MAX = "TRANS_CHECK_MAX_TIME_TOPIC";
    static final String TRANS_GROUP = "CID_RMQ_SYS_TRANS";
    // TopicValidator's system topics that carry no application message (txmq/upstream/layout.py).
    private static final Set<String> SYSTEM = new HashSet<>(Arrays.asList("TBW102", "SCHEDULE_TOPIC_XXXX",
            "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"));
    private static final String INNER_PRODUCER = "CLIENT_INNER_PRODUCER";  // MixAll.CLIENT_INNER_PRODUCER_GROUP
    private static final String RETRY = "%RETRY%";  // MixAll.RETRY_GROUP_TOPIC_PREFIX
    private static final String DLQ = "%DLQ%";  // MixAll.DLQ_GROUP_TOPIC_PREFIX

    /** EndTransactionProcessor.processRequest in progress on this thread: its request, once applied. */
    private static final ThreadLocal<Row> END_TX = new ThreadLocal<>();
    /** A renewal in progress on this thread: {prev half offset, cause}. */
    private static final ThreadLocal<Object[]> RENEW = new ThreadLocal<>();
    /** resolveDiscardMsg in progress: {half offset, result}. */
    private static final ThreadLocal<Object[]> DISCARD = new ThreadLocal<>();
    private static final ThreadLocal<Row> CHECK = new ThreadLocal<>();
    private static final ThreadLocal<Boolean> REGISTER = new ThreadLocal<>();
    /** Closed channels still in the producer table: traced DOWN already, or registered after they closed
     * (never a check's recipient, so neither UP nor DOWN); their removal is not traced. */
    private static final Set<List<Object>> CLOSED_AT_REGISTER = ConcurrentHashMap.newKeySet();  // group, channel
    /** "group/address" of each producer channel traced UP and not DOWN since (written under Trace.LOCK). */
    private static final Set<String> TRACED_UP = new HashSet<>();
    /** The check thread's last half-queue read and whether it moved a checkpoint since its last CHECKPOINT. */
    private static final ThreadLocal<long[]> SCAN = ThreadLocal.withInitial(() -> new long[] {-1, 0});

    private static volatile BrokerController broker;
    private static int checkMax = 15;
    /** Under Trace.LOCK: where the half queue, the Op queue and the commit log end (for END). */
    private static long nextHalf;
    private static long nextOp;
    private static long logEnd;
    /** Under Trace.LOCK: half offsets whose END_TX applied and no Op record listed yet (END's half_offsets). */
    private static final Set<Long> PENDING_OP = new LinkedHashSet<>();
    /** Discard record's commit-log offset -> the half copy it discarded (for an admin resume). */
    private static final Map<Long, Long> DISCARDED = new ConcurrentHashMap<>();

    private Hooks() {
    }

    private static void failed(String where, Throwable e) {
        System.err.println("txmq agent: " + where + " lost an event: " + e);
    }

    static String address(SocketAddress address) {
        String text = String.valueOf(address);
        return text.startsWith("/") ? text.substring(1) : text;
    }

    /** Whether a record of {@code topic}, other than the transaction's own topics, is an application
     * message: traced as PLAIN_PUT or REAL_PUT, and as DELIVER when a group reads it. */
    static boolean application(String topic) {
        return topic != null && !topic.startsWith("rmq_sys_") && !SYSTEM.contains(topic);
    }

    private static Integer count(MessageExt msg) {
        String times = msg.getProperty("TRANSACTION_CHECK_TIMES");
        return times == null ? 0 : Integer.valueOf(times);
    }

    private static long crc(byte[] body) {
        CRC32 crc = new CRC32();
        if (body != null) {
            crc.update(body);
        }
        return crc.getValue();
    }

    // ------------------------------------------------------------------ broker start and shutdown
    /** BrokerController.start (before): the store is loaded and recovered, nothing served yet. */
    public static void brokerStart(BrokerController controller) {
        try {
            broker = controller;
            checkMax = controller.getBrokerConfig().getTransactionCheckMax();
            MessageStore store = controller.getMessageStore();
            synchronized (Trace.LOCK) {
                nextHalf = store.getMaxOffsetInQueue(HALF, 0);
                nextOp = store.getMaxOffsetInQueue(OP, 0);
                logEnd = store.getMaxPhyOffset();
            }
            if ("cut".equals(Trace.found)) {
                Trace.emit(new Row("CRASH"), new Row("RESTART")
                        .set("result", "not shut down cleanly: upstream's broker recovered its store")
                        .set("half_offset", checkpoint(HALF)).set("op_offset", checkpoint(OP)));
            } else {
                Trace.header(Header.json(controller));
            }
        } catch (Throwable e) {
            failed("BrokerController.start", e);
        }
    }

    /** Where the commit log ends as traced so far: every record below it had its put traced. */
    static long tracedEnd() {
        synchronized (Trace.LOCK) {
            return logEnd;
        }
    }

    /** TransactionalMessageBridge.fetchConsumeOffset's rule: the committed offset, else the queue's start. */
    private static long checkpoint(String topic) {
        long offset = broker.getConsumerOffsetManager().queryOffset(TRANS_GROUP, topic, 0);
        return offset >= 0 ? offset : broker.getMessageStore().getMinOffsetInQueue(topic, 0);
    }

    /** BrokerController.shutdown (after): the END event, then the trace is closed. */
    public static void brokerShutdown() {
        synchronized (Trace.LOCK) {
            if (!Trace.isOpen()) {
                return;
            }
            Trace.emit(new Row("END").set("half_offsets", new ArrayList<>(PENDING_OP))
                    .set("queue_offset", nextHalf).set("op_offset", nextOp).set("commitlog_offset", logEnd));
            Trace.close();
        }
    }

    // ------------------------------------------------------------------ store appends
    /** DefaultMessageStore.onCommitLogAppend: every record appended, inside CommitLog's putMessageLock. */
    public static void append(MessageExtBrokerInner msg, AppendMessageResult result) {
        try {
            if (result == null || result.getStatus() != AppendMessageStatus.PUT_OK || !Trace.isOpen()) {
                return;
            }
            String topic = msg.getTopic();
            long at = result.getWroteOffset();
            long offset = result.getLogicsOffset();
            synchronized (Trace.LOCK) {
                logEnd = Math.max(logEnd, at + result.getWroteBytes());
                if (HALF.equals(topic)) {
                    nextHalf = Math.max(nextHalf, offset + 1);
                    half(msg, at, offset);
                } else if (OP.equals(topic)) {
                    nextOp = Math.max(nextOp, offset + 1);
                    op(msg, at, offset);
                } else if (CHECK_MAX.equals(topic)) {
                    discard(msg, at);
                } else if (application(topic)) {
                    stored(msg, at, offset);
                }
            }
        } catch (Throwable e) {
            failed("DefaultMessageStore.onCommitLogAppend", e);
        }
    }

    private static Row copy(String event, MessageExtBrokerInner msg, long at, long offset) {
        return new Row(event).set("txn", msg.getProperty("UNIQ_KEY")).set("producer_group", msg.getProperty("PGROUP"))
                .set("half_offset", offset).set("commitlog_offset", at);
    }

    private static void half(MessageExtBrokerInner msg, long at, long offset) {
        Object[] renew = RENEW.get();
        if (renew == null) {  // SendMessageProcessor -> TransactionalMessageBridge.asyncPutHalfMessage
            String queue = msg.getProperty("REAL_QID");
            Trace.emit(copy("HALF_PUT", msg, at, offset).set("producer", address(msg.getBornHost()))
                    .set("topic", msg.getProperty("REAL_TOPIC"))
                    .set("queue_id", queue == null ? null : Integer.valueOf(queue))
                    .set("body_crc", crc(msg.getBody())).set("born_ts", msg.getBornTimestamp())
                    .set("immunity", msg.getProperty("CHECK_IMMUNITY_TIME_IN_SECONDS")));
            return;
        }
        Trace.emit(copy("HALF_RENEW", msg, at, offset).set("prev_half_offset", renew[0])
                .set("check_count", "RESUME".equals(renew[1]) ? 0 : count(msg)).set("result", renew[1]));
    }

    /** TransactionalOpBatchService / deletePrepareMessage's forced write: an Op record and its entries. */
    private static void op(MessageExtBrokerInner msg, long at, long offset) {
        List<Long> halves = new ArrayList<>();
        String body = msg.getBody() == null ? "" : new String(msg.getBody(), java.nio.charset.StandardCharsets.UTF_8);
        for (String part : body.split(",")) {
            if (!part.isEmpty()) {
                halves.add(Long.parseLong(part.trim()));
            }
        }
        PENDING_OP.removeAll(halves);
        Trace.emit(new Row("OP_PUT").set("op_offset", offset).set("commitlog_offset", at)
                .set("queue_id", msg.getQueueId()).set("half_offsets", halves));
    }

    /** DefaultTransactionalMessageCheckListener.resolveDiscardMsg's record in TRANS_CHECK_MAX_TIME_TOPIC. */
    private static void discard(MessageExtBrokerInner msg, long at) {
        Object[] discard = DISCARD.get();
        long half = discard == null ? -1 : (Long) discard[0];
        DISCARDED.put(at, half);
        Trace.emit(copy("DISCARD", msg, at, half).set("check_count", count(msg)).set("topic", CHECK_MAX)
                .set("result", discard == null ? "CHECK_MAX" : discard[1]));
    }

    /** A real message (EndTransactionProcessor.sendFinalMessage: a commit) or a plain one. A consumer's
     * send-back of a committed message (AbstractSendMessageProcessor.consumerSendMsgBack, to the group's
     * %RETRY% or %DLQ% topic) keeps the message's sysflag, commit type included: outside an END_TX it is
     * a copy for redelivery (RETRY, which the agent does not trace), not a real message: a plain one. */
    private static void stored(MessageExtBrokerInner msg, long at, long offset) {
        Row stored = new Row("PLAIN_PUT").set("topic", msg.getTopic()).set("queue_id", msg.getQueueId())
                .set("queue_offset", offset).set("commitlog_offset", at).set("body_crc", crc(msg.getBody()));
        Row end = END_TX.get();
        boolean sentBack = end == null && (msg.getTopic().startsWith(RETRY) || msg.getTopic().startsWith(DLQ));
        if ((msg.getSysFlag() & 0xC) != 0x8 || sentBack) {  // MessageSysFlag.TRANSACTION_COMMIT_TYPE
            Trace.emit(stored);
            return;
        }
        Row real = new Row("REAL_PUT").set("txn", msg.getProperty("UNIQ_KEY"))
                .set("producer_group", msg.getProperty("PGROUP")).set("topic", msg.getTopic())
                .set("queue_id", msg.getQueueId()).set("queue_offset", offset).set("commitlog_offset", at)
                .set("body_crc", stored.get("body_crc"))
                .set("half_offset", end == null ? -1L : end.get("half_offset"));
        if (end == null || end.get("result") != null) {
            Trace.emit(real);
            return;
        }
        end.set("result", "OK").set("txn", real.get("txn"));
        Trace.emit(end, real);  // the END_TX that applied and its real message: one critical section
    }

    // ------------------------------------------------------------------ END_TRANSACTION
    /** EndTransactionProcessor.processRequest (before): the request, from its header fields. */
    public static void endTxBegin(ChannelHandlerContext ctx, RemotingCommand request) {
        END_TX.remove();
        try {
            Map<String, String> f = request.getExtFields();
            String kind = f.get("commitOrRollback");  // MessageSysFlag: 8 commit, 12 rollback, 0 unknown
            String action = "8".equals(kind) ? "COMMIT" : "12".equals(kind) ? "ROLLBACK" : "UNKNOWN";
            String txn = f.get("msgId") != null ? f.get("msgId") : f.get("transactionId");
            END_TX.set(new Row("END_TX").set("txn", txn).set("producer_group", f.get("producerGroup"))
                    .set("producer", address(ctx.channel().remoteAddress()))
                    .set("half_offset", Long.valueOf(f.get("tranStateTableOffset")))
                    .set("commitlog_offset", Long.valueOf(f.get("commitLogOffset"))).set("action", action)
                    .set("from_check", Boolean.valueOf(f.get("fromTransactionCheck"))));
        } catch (Throwable e) {
            failed("EndTransactionProcessor.processRequest", e);
        }
    }

    /** TransactionalMessageServiceImpl.deletePrepareMessage: an END_TX applied; its Op entry is buffered. */
    public static void opEntry(MessageExt half) {
        try {
            synchronized (Trace.LOCK) {
                PENDING_OP.add(half.getQueueOffset());
                Row end = END_TX.get();
                if (end != null && end.get("result") == null) {  // a rollback (a commit was traced at its put)
                    Trace.emit(end.set("result", "OK").set("txn", half.getProperty("UNIQ_KEY")));
                }
            }
        } catch (Throwable e) {
            failed("TransactionalMessageServiceImpl.deletePrepareMessage", e);
        }
    }

    /** EndTransactionProcessor.processRequest (after): an END_TX that did not apply, with its result. */
    public static void endTxEnd(RemotingCommand response) {
        Row end = END_TX.get();
        END_TX.remove();
        if (end == null || end.get("result") != null) {
            return;
        }
        Trace.emit(end.set("result", result(response)));
    }

    /** The trace's END_TX result for EndTransactionProcessor's response (see its checkPrepareMessage). */
    static String result(RemotingCommand response) {
        if (response == null) {
            return "IGNORED_UNKNOWN";  // an UNKNOW answer or request: processRequest returns null
        }
        String remark = String.valueOf(response.getRemark());
        switch (response.getCode()) {
            case 0:
                return "OK";
            case 604:  // ResponseCode.ILLEGAL_OPERATION: rejectCommitOrRollback (check immunity)
                return "IMMUNITY_REJECTED";
            case 1:  // ResponseCode.SYSTEM_ERROR
                if (remark.contains("producer group wrong")) {
                    return "GROUP_MISMATCH";
                }
                if (remark.contains("state table offset wrong")) {
                    return "OFFSET_MISMATCH";
                }
                if (remark.contains("Find prepared transaction message failed")
                        || remark.contains("commit log offset wrong")) {
                    return "NOT_FOUND";
                }
                return "STORE_ERROR";
            default:
                return "STORE_ERROR";
        }
    }

    // ------------------------------------------------------------------ the check service
    /** TransactionalMessageServiceImpl.putBackHalfMsgQueue / putImmunityMsgBackToHalfQueue (before). */
    public static void renewBegin(MessageExt copy, String cause) {
        RENEW.set(new Object[] {copy.getQueueOffset(), cause});
    }

    public static void renewEnd() {
        RENEW.remove();
    }

    /** AdminBrokerProcessor.resumeCheckHalfMessage (before): a discarded half written back, count 0. */
    public static void resumeBegin(RemotingCommand request) {
        long prev = -1;
        try {
            long at = MessageDecoder.decodeMessageId(request.getExtFields().get("msgId")).getOffset();
            prev = DISCARDED.getOrDefault(at, -1L);
        } catch (Throwable e) {
            failed("AdminBrokerProcessor.resumeCheckHalfMessage", e);
        }
        RENEW.set(new Object[] {prev, "RESUME"});
    }

    /** resolveDiscardMsg (before): needDiscard (the count reached transactionCheckMax) or needSkip (older
     * than fileReservedTime; the count was raised first). */
    public static void discardBegin(MessageExt copy) {
        String result = count(copy) >= checkMax ? "CHECK_MAX" : "RETENTION";
        DISCARD.set(new Object[] {copy.getQueueOffset(), result});
    }

    public static void discardEnd() {
        DISCARD.remove();
    }

    /** AbstractTransactionalMessageCheckListener.sendCheckMessage (before): the renewed copy to check. */
    public static void checkBegin(MessageExt copy) {
        CHECK.set(new Row("CHECK").set("txn", copy.getProperty("UNIQ_KEY"))
                .set("producer_group", copy.getProperty("PGROUP")).set("half_offset", copy.getQueueOffset())
                .set("commitlog_offset", copy.getCommitLogOffset()).set("check_count", count(copy)));
    }

    /** Broker2Client.checkProducerTransactionState: the check request goes to this producer's channel. */
    public static void checkSent(Channel channel) {
        Row check = CHECK.get();
        CHECK.remove();
        if (check != null) {
            String group = (String) check.get("producer_group");
            String producer = address(channel.remoteAddress());
            synchronized (Trace.LOCK) {
                producerUp(group, producer);  // the check may pick a channel before registerEnd traced it
                Trace.emit(check.set("producer", producer).set("result", "SENT"));
            }
        }
    }

    /**
     * sendCheckMessage (after): ProducerManager.getAvailableChannel found no channel of the group. It skips
     * a closed channel whose removal (doChannelCloseEvent, on the Netty event thread) has not run yet: such
     * a channel is traced DOWN here, before the check, and its removal later is not traced again.
     */
    public static void checkEnd() {
        Row check = CHECK.get();
        CHECK.remove();
        if (check == null) {
            return;
        }
        synchronized (Trace.LOCK) {
            String group = (String) check.get("producer_group");
            Map<Channel, ClientChannelInfo> channels = broker == null || group == null ? null
                    : broker.getProducerManager().getGroupChannelTable().get(group);
            for (Channel channel : channels == null ? new ArrayList<Channel>() : new ArrayList<>(channels.keySet())) {
                String producer = address(channel.remoteAddress());
                if (!channel.isActive() && TRACED_UP.remove(group + "/" + producer)) {
                    CLOSED_AT_REGISTER.add(Arrays.asList(group, channel));
                    Trace.emit(new Row("PRODUCER").set("producer_group", group).set("producer", producer)
                            .set("result", "DOWN"));
                }
            }
            Trace.emit(check.set("result", "NO_PRODUCER"));
        }
    }

    /** TransactionalMessageBridge.getHalfMessage: the check run examines this half-queue offset. */
    public static void halfRead(long offset) {
        SCAN.get()[0] = offset;
    }

    /** TransactionalMessageBridge.updateConsumeOffset: the run moves the half or the Op checkpoint. */
    public static void checkpointMoved() {
        SCAN.get()[1] = 1;
    }

    /**
     * TransactionalMessageBridge.getOpMessage (after). fillOpRemoveMap reads 32 Op records: OP_READ, its
     * view now ends at the read's next offset. The read of 1 record at the end of a run is for logging
     * only; it follows the run's updateConsumeOffset calls and the read of the half at the new checkpoint,
     * so it is where a CHECKPOINT that moved is traced.
     */
    public static void opRead(int queueId, long offset, int nums, PullResult result) {
        if (nums != 1) {
            long end = result == null ? offset : result.getNextBeginOffset();
            Trace.emit(new Row("OP_READ").set("queue_id", queueId).set("op_offset", end));
            return;
        }
        long[] scan = SCAN.get();
        if (scan[1] != 0) {
            scan[1] = 0;
            Trace.emit(new Row("CHECKPOINT").set("queue_id", queueId).set("half_offset", scan[0])
                    .set("op_offset", offset));
        }
    }

    // ------------------------------------------------------------------ producers
    /** ProducerManager.registerProducer (before): is this channel new to the group? */
    public static void registerBegin(ProducerManager manager, String group, ClientChannelInfo info) {
        Map<Channel, ClientChannelInfo> channels = manager.getGroupChannelTable().get(group);
        REGISTER.set(!INNER_PRODUCER.equals(group) && (channels == null || !channels.containsKey(info.getChannel())));
    }

    /**
     * ProducerManager.registerProducer (after): a new channel of the group was added, PRODUCER UP. A
     * heartbeat handled after its connection closed (the heartbeat pool runs it after the close event,
     * whose doChannelCloseEvent found nothing to remove) registers a closed channel, which stays in the
     * table until scanNotActiveChannel expires it; getAvailableChannel never picks an inactive channel, so
     * it is no recipient of a check: neither its UP nor its removal is traced.
     */
    public static void registerEnd(ProducerManager manager, String group, ClientChannelInfo info) {
        boolean fresh = Boolean.TRUE.equals(REGISTER.get());
        REGISTER.remove();
        Map<Channel, ClientChannelInfo> channels = manager.getGroupChannelTable().get(group);
        if (fresh && channels != null && channels.containsKey(info.getChannel())) {
            if (!info.getChannel().isActive()) {
                CLOSED_AT_REGISTER.add(Arrays.asList(group, info.getChannel()));
                return;
            }
            synchronized (Trace.LOCK) {
                producerUp(group, address(info.getChannel().remoteAddress()));
            }
        }
    }

    /**
     * PRODUCER UP of a channel of the group, once. registerProducer puts the channel in the group's table
     * before its end hook runs, so the check executor may find the channel (getAvailableChannel) and send
     * it a check first: that check traces the UP before itself, and the end hook then adds nothing.
     * The caller holds Trace.LOCK, so the set and the trace's order agree.
     */
    private static void producerUp(String group, String producer) {
        if (TRACED_UP.add(group + "/" + producer)) {
            Trace.emit(new Row("PRODUCER").set("producer_group", group).set("producer", producer)
                    .set("result", "UP"));
        }
    }

    /** ProducerManager.callProducerChangeListener: CLIENT_UNREGISTER is a producer's channel leaving. */
    public static void producerChange(ProducerGroupEvent event, String group, ClientChannelInfo info) {
        if (event == ProducerGroupEvent.CLIENT_UNREGISTER && info != null && !INNER_PRODUCER.equals(group)) {
            if (CLOSED_AT_REGISTER.remove(Arrays.asList(group, info.getChannel()))) {
                return;
            }
            String producer = address(info.getChannel().remoteAddress());
            synchronized (Trace.LOCK) {
                TRACED_UP.remove(group + "/" + producer);
                Trace.emit(new Row("PRODUCER").set("producer_group", group).set("producer", producer)
                        .set("result", "DOWN"));
            }
        }
    }
}
