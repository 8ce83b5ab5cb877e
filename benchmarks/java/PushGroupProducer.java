// Sends COUNT plain messages with keys m0, m1, ... to TOPIC at RATE a second, for
// benchmarks/upstream_groups.py. java -cp "$ROCKETMQ_HOME/lib/*" PushGroupProducer.java TOPIC COUNT RATE
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

public class PushGroupProducer {
    public static void main(String[] args) throws Exception {
        int count = Integer.parseInt(args[1]);
        long gapNanos = 1_000_000_000L / Integer.parseInt(args[2]);
        DefaultMQProducer producer = new DefaultMQProducer("group_bench_producer");
        producer.setInstanceName("group-bench-producer");
        producer.setSendMsgTimeout(20_000); // a loaded machine answers the first route request slowly
        producer.setMqClientApiTimeout(20_000); // the name server's route answer too (3 s by default)
        producer.start();
        long next = System.nanoTime();
        for (int i = 0; i < count; i++) {
            producer.send(new Message(args[0], "", "m" + i, ("m" + i).getBytes()));
            if (i == 0) {
                System.out.println("first sent");
            }
            next += gapNanos;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
        }
        producer.shutdown();
        System.out.println("sent " + count);
    }
}
