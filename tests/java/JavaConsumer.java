import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Consumes messages of one topic with the real RocketMQ 4.9.8 client and prints one JSON line per message.
 *
 * Usage: {@code java JavaConsumer mode=push|litepull namesrv=HOST:PORT topic=T group=G count=N [timeoutMs=60000]
 * [commitSync=true]}. With {@code commitSync=true} a lite pull consumer commits the offsets of every message it
 * handed over ({@code commitSync}) before it shuts down, so the broker holds exactly what was printed.
 * A new group starts at the first offset of every queue (CONSUME_FROM_FIRST_OFFSET). Every delivery is printed,
 * duplicates included: msgId (the client's unique id), offsetMsgId, topic, queueId, queueOffset, reconsumeTimes,
 * bodyLength and bodySha256 (of the body as the client hands it over, i.e. decompressed). The program exits 0 once
 * N deliveries were printed, 3 when the timeout passes first.
 */
public final class JavaConsumer {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaConsumer() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parseArgs(argv);
        int count = Integer.parseInt(args.get("count"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeoutMs", "60000"));
        boolean done;
        if ("push".equals(args.get("mode"))) {
            done = push(args, count, timeoutMs);
        } else if ("litepull".equals(args.get("mode"))) {
            done = litePull(args, count, timeoutMs);
        } else {
            throw new IllegalArgumentException("mode must be push or litepull, not " + args.get("mode"));
        }
        OUT.flush();
        Runtime.getRuntime().halt(done ? 0 : 3);
    }

    static boolean push(Map<String, String> args, int count, long timeoutMs) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("hareplica-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(args.get("topic"), "*");
        CountDownLatch latch = new CountDownLatch(count);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                print(m);
                latch.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean done = latch.await(timeoutMs, TimeUnit.MILLISECONDS);
        shutdown(consumer::shutdown);
        return done;
    }

    static boolean litePull(Map<String, String> args, int count, long timeoutMs) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args.get("group"));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("hareplica-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(args.get("topic"), "*");
        consumer.start();
        long deadline = System.currentTimeMillis() + timeoutMs;
        AtomicInteger seen = new AtomicInteger();
        while (seen.get() < count && System.currentTimeMillis() < deadline) {
            List<MessageExt> msgs = consumer.poll(500);
            for (MessageExt m : msgs) {
                print(m);
                seen.incrementAndGet();
            }
        }
        if ("true".equals(args.get("commitSync"))) {
            consumer.commitSync();
        }
        shutdown(consumer::shutdown);
        return seen.get() >= count;
    }

    /** The {@code key=value} arguments as a map (the programs' common command-line form). */
    static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            args.put(a.substring(0, eq), a.substring(eq + 1));
        }
        return args;
    }

    /** Shut the client down (offsets persisted, client unregistered), waiting at most 5 s. */
    static void shutdown(Runnable shutdown) throws InterruptedException {
        Thread t = new Thread(shutdown, "consumer-shutdown");
        t.setDaemon(true);
        t.start();
        t.join(5000);
    }

    static synchronized void print(MessageExt m) {
        OUT.print(Json.write(deliveryLine(m)));
        OUT.print('\n');
        OUT.flush();
    }

    /** The fields every consumer program prints for a delivery, in this order. */
    static Map<String, Object> deliveryLine(MessageExt m) {
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("msgId", m.getMsgId());
        line.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        line.put("topic", m.getTopic());
        line.put("queueId", m.getQueueId());
        line.put("queueOffset", m.getQueueOffset());
        line.put("reconsumeTimes", m.getReconsumeTimes());
        line.put("bodyLength", body.length);
        line.put("bodySha256", JavaProducer.sha256(body));
        return line;
    }
}
