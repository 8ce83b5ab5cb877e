// A lite pull consumer for the serve --remoting tests: subscribes to a topic from its first offset, polls
// until it has seen the expected number of distinct messages (or its deadline passes), prints the count and
// exits 0 when it saw them all. Run in source-file mode: java -cp "$ROCKETMQ_HOME/lib/*" LitePullConsumerRun.java
// TOPIC GROUP EXPECTED; the name server comes from $NAMESRV_ADDR, as for upstream's examples.
import java.util.HashSet;
import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class LitePullConsumerRun {
    public static void main(String[] args) throws Exception {
        String topic = args[0];
        int expected = Integer.parseInt(args[2]);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args[1]);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.start();
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + 120_000;
        while (seen.size() < expected && System.currentTimeMillis() < deadline) {
            for (MessageExt message : consumer.poll(1000)) {
                seen.add(message.getMsgId());
            }
        }
        System.out.println("received " + seen.size());
        consumer.shutdown();
        System.exit(seen.size() >= expected ? 0 : 1);
    }
}
