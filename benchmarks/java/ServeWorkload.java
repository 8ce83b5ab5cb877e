// The client half of `python -m benchmarks.serve --client java`: RocketMQ's official 5.x Java client
// against one gRPC endpoint (txmq serve or upstream's proxy), the same program on both sides.
//
// Usage: java -cp <5.x client> ServeWorkload HOST:PORT TX_TOPIC TOPIC GROUP ROUNDS THREADS
// THREADS threads share one producer; each round is a normal send to TOPIC and a transactional send to
// TX_TOPIC committed at once. One simple consumer, subscribed to both topics, receives and acks until every
// message came. Prints one JSON line: the wall time from the first send to the last message consumed, and
// per message the latency of the send, of the send+commit, and from the send's start to its consumption (ms).
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

public class ServeWorkload {
    static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
    static final byte[] BODY = "x".repeat(100).getBytes(StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        String endpoint = args[0], txTopic = args[1], topic = args[2], group = args[3];
        int rounds = Integer.parseInt(args[4]), threads = Integer.parseInt(args[5]);
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(Map.of(txTopic, FilterExpression.SUB_ALL, topic, FilterExpression.SUB_ALL))
            .build();
        Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(txTopic, topic)
            .setTransactionChecker(view -> TransactionResolution.COMMIT).build();
        Map<String, Long> started = new ConcurrentHashMap<>(), arrived = new ConcurrentHashMap<>();
        List<Double> sendMs = new ArrayList<>(), commitMs = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        long begin = System.nanoTime();
        List<Future<?>> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int count = rounds / threads + (t < rounds % threads ? 1 : 0);
            workers.add(pool.submit(() -> {
                for (int i = 0; i < count; i++) {
                    long t0 = System.nanoTime();
                    String sent = producer.send(message(topic)).getMessageId().toString();
                    long t1 = System.nanoTime();
                    Transaction transaction = producer.beginTransaction();
                    String half = producer.send(message(txTopic), transaction).getMessageId().toString();
                    transaction.commit();
                    long t2 = System.nanoTime();
                    started.put(sent, t0);
                    started.put(half, t1);
                    synchronized (sendMs) {
                        sendMs.add((t1 - t0) / 1e6);
                        commitMs.add((t2 - t1) / 1e6);
                    }
                }
                return null;
            }));
        }
        long deadline = System.nanoTime() + 600_000_000_000L;
        while (arrived.size() < 2 * rounds && System.nanoTime() < deadline) {
            List<MessageView> batch;
            try {
                batch = consumer.receive(32, Duration.ofSeconds(15));
            } catch (Exception e) {  // upstream's proxy refuses receives until the client's settings arrived
                Thread.sleep(200);
                continue;
            }
            for (MessageView view : batch) {
                arrived.putIfAbsent(view.getMessageId().toString(), System.nanoTime());
                consumer.ack(view);
            }
        }
        double elapsed = (System.nanoTime() - begin) / 1e9;
        for (Future<?> worker : workers) {
            worker.get();
        }
        pool.shutdown();
        List<Double> endToEnd = arrived.entrySet().stream().filter(e -> started.containsKey(e.getKey()))
            .map(e -> (e.getValue() - started.get(e.getKey())) / 1e6).collect(Collectors.toList());
        System.out.println("{\"elapsed_s\": " + elapsed + ", \"consumed\": " + arrived.size() + ", \"send_ms\": "
            + sendMs + ", \"commit_ms\": " + commitMs + ", \"end_to_end_ms\": " + endToEnd + "}");
        System.out.flush();
        producer.close();
        consumer.close();
        System.exit(0);
    }

    static Message message(String topic) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setBody(BODY).build();
    }
}
