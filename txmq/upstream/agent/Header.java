package txmq.agent;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * The trace's header line: mode rocketmq and the broker's own settings under the config keys txmq's
 * broker writes (txmq/config.py BrokerConfig), read from upstream's BrokerConfig and MessageStoreConfig.
 */
final class Header {
    /** Events upstream's broker does not show (LOCAL_TX: the producer's decision travels only in END_TX)
     * or that this agent does not trace (DELIVER, EXPIRE), and the consumer-group events. */
    static final String[] ABSENT = {"LOCAL_TX", "DELIVER", "EXPIRE", "MEMBER", "ALLOCATE", "CONSUME",
        "OFFSET_COMMIT", "RETRY"};

    private Header() {
    }

    static String json(BrokerController controller) {
        BrokerConfig broker = controller.getBrokerConfig();
        MessageStoreConfig store = controller.getMessageStoreConfig();
        StringBuilder out = new StringBuilder(512);
        out.append("{\"format\": \"txmq-trace\", \"version\": 2, \"mode\": \"rocketmq\", \"seed\": null, ")
                .append("\"config\": {\"mode\": \"rocketmq\"")
                .append(", \"transaction_timeout_ms\": ").append(broker.getTransactionTimeOut())
                .append(", \"check_interval_ms\": ").append(broker.getTransactionCheckInterval())
                .append(", \"check_max\": ").append(broker.getTransactionCheckMax())
                .append(", \"file_reserved_time_ms\": ").append(store.getFileReservedTime() * 3_600_000L)
                .append(", \"op_batch_max_chars\": ").append(broker.getTransactionOpMsgMaxSize())
                .append(", \"op_batch_interval_ms\": ").append(broker.getTransactionOpBatchInterval())
                .append(", \"consumer_groups\": {}, \"source\": \"upstream-agent\", \"absent_events\": [");
        for (int i = 0; i < ABSENT.length; i++) {
            out.append(i > 0 ? ", " : "").append('"').append(ABSENT[i]).append('"');
        }
        out.append("], \"upstream\": {\"broker\": ");
        Row.string(out, broker.getBrokerName());
        out.append(", \"version\": ");
        Row.string(out, String.valueOf(org.apache.rocketmq.common.MQVersion.getVersionDesc(
                org.apache.rocketmq.common.MQVersion.CURRENT_VERSION)));
        out.append("}}}");
        return out.toString();
    }
}
