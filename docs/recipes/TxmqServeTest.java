// A JUnit 5 test of an application on RocketMQ's 5.x Java client, against `txmq serve --clock manual`
// (docs/serve.md, "Recipes"). The test owns the broker's clock: a transaction left open is checked after
// one advance, a delayed message comes after one advance, with no waiting on the wall clock. When the
// tests are done, serve is stopped; `--judge` makes it check the session's trace against txmq's invariant
// catalogue and exit 1 on a violation, which fails the class.
//
// Classpath: JUnit Jupiter 5 and the RocketMQ 5.x Java client (org.apache.rocketmq:rocketmq-client-java).
// `txmq` is found on PATH, or where the environment variable TXMQ says. txmq's test suite runs this file
// as printed (tests/test_recipes.py).
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(120)
class TxmqServeTest {
    static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
    static final HttpClient HTTP = HttpClient.newHttpClient();
    static Process serve;
    static Path dir;
    static ClientConfiguration config;
    static String admin;  // HOST:PORT of serve's admin interface (the clock)

    @BeforeAll
    static void startServe() throws Exception {
        dir = Files.createTempDirectory("txmq-serve");
        String txmq = System.getenv().getOrDefault("TXMQ", "txmq");
        serve = new ProcessBuilder(txmq, "serve", "--port", "0", "--clock", "manual", "--judge",
                "--store", dir.resolve("store").toString(), "--trace", dir.resolve("session.ndjson").toString(),
                "--topic", "Orders:TRANSACTION", "--topic", "Reminders:DELAY",
                "--proxy", "min_long_polling_ms=1000")  // an empty receive then costs a second, not five
            .redirectError(dir.resolve("serve.log").toFile()).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(serve.getInputStream(), StandardCharsets.UTF_8));
        // first line: "txmq serve: listening on 127.0.0.1:40113 (...)"; then "txmq serve: admin on 127.0.0.1:40117 (...)"
        String endpoint = field(out.readLine(), "listening on (\\S+:\\d+)");
        String line = out.readLine();
        while (line != null && !line.contains(" admin on ")) {
            line = out.readLine();
        }
        admin = field(line, "admin on (\\S+:\\d+)");
        config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false).build();
    }

    @AfterAll
    static void stopServe() throws Exception {
        if (serve == null) {
            return;
        }
        serve.destroy();  // SIGTERM: serve completes the trace, then judges it (--judge)
        assertTrue(serve.waitFor(60, TimeUnit.SECONDS), "txmq serve did not stop");
        assertEquals(0, serve.exitValue(), Files.readString(dir.resolve("serve.log")));
        try (Stream<Path> files = Files.walk(dir)) {  // kept above, for a look at the trace, when it failed
            files.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        }
    }

    @Test
    void anOpenTransactionIsCheckedAfterOneAdvance() throws Exception {
        CountDownLatch checked = new CountDownLatch(1);
        AtomicReference<String> checkedId = new AtomicReference<>();
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics("Orders")
                .setTransactionChecker(view -> {  // the application's check listener
                    checkedId.set(view.getMessageId().toString());
                    checked.countDown();
                    return TransactionResolution.COMMIT;
                }).build()) {
            Transaction transaction = producer.beginTransaction();
            SendReceipt receipt = producer.send(message("Orders", "order 1"), transaction);
            // neither commit nor rollback: as if the application had died before deciding
            awaitProducer("Orders");  // a check can reach the producer (a 5.x producer's group is its topic)
            advance(6_000 + 30_000);  // the transaction timeout, then a check interval (upstream's defaults)
            assertTrue(checked.await(10, TimeUnit.SECONDS), "the check listener was not called");
            assertEquals(receipt.getMessageId().toString(), checkedId.get());
        }
    }

    @Test
    void aDelayedMessageComesAfterOneAdvance() throws Exception {
        try (SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup("reminder-sender").setAwaitDuration(Duration.ofSeconds(1))
                .setSubscriptionExpressions(Map.of("Reminders", FilterExpression.SUB_ALL)).build();
             Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config)
                .setTopics("Reminders").build()) {
            long due = now() + 60_000;  // in a minute of the broker's time
            producer.send(PROVIDER.newMessageBuilder().setTopic("Reminders").setDeliveryTimestamp(due)
                .setBody("call back".getBytes(StandardCharsets.UTF_8)).build());
            assertTrue(consumer.receive(16, Duration.ofSeconds(15)).isEmpty(), "delivered before its time");
            advance(61_000);  // past its time
            List<MessageView> received = List.of();
            for (int i = 0; i < 10 && received.isEmpty(); i++) {
                received = consumer.receive(16, Duration.ofSeconds(15));
            }
            assertEquals(1, received.size());
            assertEquals("call back", StandardCharsets.UTF_8.decode(received.get(0).getBody()).toString());
            consumer.ack(received.get(0));
        }
    }

    static Message message(String topic, String body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setBody(body.getBytes(StandardCharsets.UTF_8)).build();
    }

    // The admin interface: HTTP and JSON on loopback (docs/serve.md, "Time belongs to the test").
    static String admin(String method, String path, String body) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://" + admin + path));
        request = body == null ? request.GET() : request.header("Content-Type", "application/json")
            .method(method, HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> answer = HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, answer.statusCode(), answer.body());
        return answer.body();
    }

    static long advance(long ms) throws Exception {  // answers once what fell due has run
        return Long.parseLong(field(admin("POST", "/clock/advance", "{\"ms\": " + ms + "}"), "\"now_ms\":\\s*(\\d+)"));
    }

    static long now() throws Exception {
        return Long.parseLong(field(admin("GET", "/clock", null), "\"now_ms\":\\s*(\\d+)"));
    }

    static void awaitProducer(String group) throws Exception {
        for (int i = 0; i < 300 && !admin("GET", "/producers", null).contains("\"" + group + "\""); i++) {
            Thread.sleep(100);
        }
    }

    static String field(String text, String regex) {
        assertNotNull(text, "txmq serve ended before printing its addresses");
        Matcher found = Pattern.compile(regex).matcher(text);
        assertTrue(found.find(), text);
        return found.group(1);
    }
}
