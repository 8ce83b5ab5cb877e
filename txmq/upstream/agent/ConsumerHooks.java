package txmq.agent;

import io.netty.channel.Channel;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.zip.CRC32;

import org.apache.rocketmq.common.KeyBuilder;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;

/**
 * The consumer side of upstream's broker (see {@link Agent#TARGETS}): every message a consumer group is
 * given (DELIVER) and every consume offset stored for a group (OFFSET_COMMIT), with the columns txmq's own
 * broker writes (txmq/delivery.py, docs/trace-events.md). Nothing here runs on the put path: a delivery is
 * traced on the thread answering the pull or pop, from the records the store returned, before upstream
 * copies them into the response (which releases them).
 */
public final class ConsumerHooks {
    /** MixAll.CID_RMQ_SYS_PREFIX: the broker's own groups (the check service's, pop revive's). */
    private static final String SYSTEM_GROUP = "CID_RMQ_SYS_";
    /** How long a delivery waits for its put to be traced (see {@link #awaitPuts}). */
    private static final long PUT_WAIT_NANOS = 1_000_000_000L;

    private ConsumerHooks() {
    }

    /**
     * DefaultPullMessageResultHandler.handle (before): a pull that found messages is answered with them
     * (composeResponseHeader maps FOUND to SUCCESS). Runs for a pull answered at once and for one held by
     * PullRequestHoldService and answered when a message arrived; the member is the pull's connection.
     */
    public static void pulled(GetMessageResult result, PullMessageRequestHeader request, Channel channel) {
        try {
            if (result != null && result.getStatus() == GetMessageStatus.FOUND && Trace.isOpen()) {
                deliver(result, request.getConsumerGroup(), Hooks.address(channel.remoteAddress()), false);
            }
        } catch (Throwable e) {
            System.err.println("txmq agent: DefaultPullMessageResultHandler.handle lost an event: " + e);
        }
    }

    /**
     * PopMessageProcessor.readGetMessageResult (before): the popped records are copied into the answer
     * (transferMsgByHeap, upstream's default; both PopMessageProcessor's own pop and PopConsumerService's
     * call it). A pop names no member here: through the 5.x proxy the proxy is the broker's client anyway.
     */
    public static void popped(GetMessageResult result, String group) {
        try {
            if (result != null && Trace.isOpen()) {
                deliver(result, group, null, true);
            }
        } catch (Throwable e) {
            System.err.println("txmq agent: PopMessageProcessor.readGetMessageResult lost an event: " + e);
        }
    }

    /**
     * One DELIVER per record, all in one critical section. The position is the record's own (its topic,
     * for a retry topic too, queue id and queue offset); txn is the message's UNIQ_KEY (what REAL_PUT
     * carries), else its offset message id. A pop's attempt is the message's reconsume count + 1 (upstream
     * redelivers a popped message as a copy at a new position of the group's retry topic); a pull's is null.
     * PopMessageProcessor.popMsgFromQueue hands such a copy out under its original topic (it sets the topic
     * to the pop's and adds the POP_CK property, unless popResponseReturnActualRetryTopic), at the retry
     * topic's queue id and offset: the copy's own topic is put back from KeyBuilder.buildPopRetryTopic.
     */
    private static void deliver(GetMessageResult result, String group, String member, boolean pop) {
        List<ByteBuffer> buffers = result.getMessageBufferList();
        if (group == null || group.startsWith(SYSTEM_GROUP) || buffers.isEmpty()) {
            return;
        }
        List<Row> rows = new ArrayList<>(buffers.size());
        long end = 0;
        for (ByteBuffer buffer : buffers) {
            MessageExt msg = MessageDecoder.decode(buffer.duplicate(), true, false);
            if (msg == null || !Hooks.application(msg.getTopic())) {
                continue;
            }
            String txn = msg.getProperty("UNIQ_KEY");
            String topic = pop && msg.getProperty("POP_CK") != null && !Hooks.groupCopy(msg.getTopic())
                    ? KeyBuilder.buildPopRetryTopic(msg.getTopic(), group, Hooks.retryTopicV2()) : msg.getTopic();
            CRC32 crc = new CRC32();
            if (msg.getBody() != null) {
                crc.update(msg.getBody());
            }
            rows.add(new Row("DELIVER").set("txn", txn != null ? txn : msg.getMsgId()).set("consumer_group", group)
                    .set("producer", member).set("topic", topic).set("queue_id", msg.getQueueId())
                    .set("queue_offset", msg.getQueueOffset()).set("commitlog_offset", msg.getCommitLogOffset())
                    .set("body_crc", crc.getValue()).set("attempt", pop ? msg.getReconsumeTimes() + 1 : null));
            end = Math.max(end, msg.getCommitLogOffset() + 1);
        }
        if (!rows.isEmpty()) {
            awaitPuts(end);
            Trace.emit(rows.toArray(new Row[0]));
        }
    }

    /**
     * Until every record below {@code end} had its put traced. CommitLog.asyncPutMessage makes a record
     * readable when MappedFile.appendMessage moves the write position, and calls onCommitLogAppend (where
     * its put is traced) only after that, still inside putMessageLock: ReputMessageService can dispatch the
     * record, and a pull read it, in between (4 of 1,000 deliveries came before their PLAIN_PUT at a load
     * of 32). The put's thread holds the lock and is about to trace it, so the wait is short; the pull
     * waits, the put path does nothing more. A record whose put is never traced (a batch send:
     * asyncPutMessages does not call onCommitLogAppend) is delivered after the wait.
     */
    private static void awaitPuts(long end) {
        long deadline = System.nanoTime() + PUT_WAIT_NANOS;
        while (Hooks.tracedEnd() < end && System.nanoTime() < deadline) {
            LockSupport.parkNanos(100_000L);
        }
    }

    /**
     * ConsumerOffsetManager.commitOffset: a group's consume offset of a queue is stored. Callers: a pull
     * carrying the member's offset (PullMessageProcessor.tryCommitOffset), UPDATE_CONSUMER_OFFSET
     * (ConsumerManageProcessor), an admin reset, and the pop paths, where the broker moves a pop group's
     * offset itself; {@code clientHost} is the member's address, or the caller's name for those. The check
     * service's own checkpoints (group CID_RMQ_SYS_TRANS, system topics) are CHECKPOINT, not traced here.
     */
    public static void committed(String clientHost, String group, String topic, int queueId, long offset) {
        try {
            if (group == null || group.startsWith(SYSTEM_GROUP) || !Hooks.application(topic) || !Trace.isOpen()) {
                return;
            }
            String member = clientHost != null && clientHost.startsWith("/") ? clientHost.substring(1) : clientHost;
            Trace.emit(new Row("OFFSET_COMMIT").set("consumer_group", group).set("producer", member)
                    .set("topic", topic).set("queue_id", queueId).set("queue_offset", offset));
        } catch (Throwable e) {
            System.err.println("txmq agent: ConsumerOffsetManager.commitOffset lost an event: " + e);
        }
    }
}
