// One member of a consumer group as upstream's 4.x push consumer runs it (DefaultMQPushConsumer, clustering,
// AllocateMessageQueueAveragely, persistConsumerOffsetInterval 5 s), for benchmarks/upstream_groups.py.
// Every consumption is appended to OUT as "millis member key queueId queueOffset reconsumeTimes" before the
// listener answers, so a SIGKILL (a crash) loses no record of what was consumed. The member shuts down
// cleanly (persisting its offsets) when the file STOP appears. With a sixth argument GO it starts consuming
// only once that file appears (a join at a set time, the JVM already up). Run in source-file mode:
//   java -cp "$ROCKETMQ_HOME/lib/*" PushGroupMember.java GROUP TOPIC MEMBER OUT STOP [GO]
// with the name server in $NAMESRV_ADDR.
import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class PushGroupMember {
    public static void main(String[] args) throws Exception {
        String member = args[2];
        PrintWriter out = new PrintWriter(new FileWriter(args[3], true), true);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[0]);
        consumer.setInstanceName(member);
        consumer.setClientIP("127.0.0.1");
        consumer.setMqClientApiTimeout(20_000); // a loaded machine answers the first route request slowly
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(args[1], "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            synchronized (out) {
                for (MessageExt m : messages) {
                    out.println(System.currentTimeMillis() + " " + member + " " + m.getKeys() + " " + m.getQueueId() + " " + m.getQueueOffset()
                        + " " + m.getReconsumeTimes());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        if (args.length > 5) {
            System.out.println("ready " + member);
            while (!Files.exists(Path.of(args[5]))) {
                Thread.sleep(20);
            }
        }
        consumer.start();
        System.out.println("started " + member);
        Path stop = Path.of(args[4]);
        while (!Files.exists(stop)) {
            Thread.sleep(100);
        }
        consumer.shutdown();
        System.out.println("left " + member);
    }
}
