package txmq.agent;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * The trace's header line: mode rocketmq and the broker's own settings under the config keys txmq's
 * broker writes (txmq/config.py BrokerConfig), read from upstream's BrokerConfig and MessageStoreConfig.
 */
final class Header {
    /** Events upstream's broker does not show (LOCAL_TX: the producer's decision travels only in END_TX;
     * what a group's members do but their offset commits: only the members see a consumption) or that this
     * agent does not trace (EXPIRE). */
    static final String[] ABSENT = {"LOCAL_TX", "EXPIRE", "MEMBER", "ALLOCATE", "CONSUME", "RETRY"};

    /** The groups whose deliveries are owed (EventuallyDelivered): {@code -Dtxmq.trace.groups=G=T1,T2;G2=T3}
     * in the broker's JAVA_OPT_EXT. The broker learns a group's subscription only from its members'
     * heartbeats, after the header is written, so whoever runs the consumers names them. */
    static final String GROUPS = "txmq.trace.groups";

    private Header() {
    }

    /** The header's consumer_groups (group -> topics) from the property's text. */
    static String groups(String text) {
        StringBuilder out = new StringBuilder("{");
        for (String entry : text.split(";")) {
            String[] parts = entry.split("=", 2);
            if (parts.length != 2 || parts[0].trim().isEmpty()) {
                continue;
            }
            out.append(out.length() > 1 ? ", " : "");
            Row.string(out, parts[0].trim());
            out.append(": [");
            String[] topics = parts[1].split(",");
            for (int i = 0; i < topics.length; i++) {
                out.append(i > 0 ? ", " : "");
                Row.string(out, topics[i].trim());
            }
            out.append(']');
        }
        return out.append('}').toString();
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
                .append(", \"consumer_groups\": ").append(groups(System.getProperty(GROUPS, "")))
                .append(", \"source\": \"upstream-agent\", \"absent_events\": [");
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
