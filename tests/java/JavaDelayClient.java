import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Delayed messages end to end with the real RocketMQ 4.9.8 client: a producer sends them, a push consumer that is
 * already running receives them, and every delivery's timing is printed.
 *
 * Usage: {@code java JavaDelayClient namesrv=HOST:PORT topic=T group=G levels=1,2,3 perLevel=N
 * [timeoutMs=60000]}. First one plain message ("warm-up", tag "Now") is sent and consumed, so the consumer is
 * subscribed and balanced before any delayed message is sent. Then N messages per delay level (tag "Later", body
 * "delayed level L #i") are sent with {@code setDelayTimeLevel(L)}.
 *
 * One JSON line per send ({@code "event":"send"}: msgId, status, level, sentAt — the client clock just before the
 * send, ms) and per delivery ({@code "event":"delivery"}: JavaConsumer's fields plus level — the DELAY property —,
 * bornTimestamp, storeTimestamp of the delivered record, receivedAt — the client clock —, tags and properties).
 * Duplicates are printed too. Once every delayed message was delivered the program waits 2 s more for duplicates
 * and exits 0; 3 when the timeout passes first, 2 when a send failed.
 */
public final class JavaDelayClient {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaDelayClient() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = JavaConsumer.parseArgs(argv);
        String topic = args.get("topic");
        String[] levels = args.getOrDefault("levels", "1,2,3").split(",");
        int perLevel = Integer.parseInt(args.getOrDefault("perLevel", "2"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeoutMs", "60000"));
        long deadline = System.currentTimeMillis() + timeoutMs;

        DefaultMQProducer producer = new DefaultMQProducer(args.get("group") + "_producer");
        producer.setNamesrvAddr(args.get("namesrv"));
        producer.setInstanceName("hareplica-delay-" + ProcessHandle.current().pid());
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10000);
        producer.start();
        if (!send(producer, new Message(topic, "Now", "warm-up".getBytes(StandardCharsets.UTF_8)), 0)) {
            exit(2);
        }

        CountDownLatch warm = new CountDownLatch(1);
        CountDownLatch delayed = new CountDownLatch(levels.length * perLevel);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("hareplica-delay-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long receivedAt = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                Map<String, Object> line = JavaConsumer.deliveryLine(m);
                line.put("event", "delivery");
                line.put("level", m.getProperty("DELAY"));
                line.put("bornTimestamp", m.getBornTimestamp());
                line.put("storeTimestamp", m.getStoreTimestamp());
                line.put("receivedAt", receivedAt);
                line.put("tags", m.getTags());
                line.put("properties", new TreeMap<>(m.getProperties()));
                print(line);
                if ("Now".equals(m.getTags())) {
                    warm.countDown();
                } else {
                    delayed.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        if (!warm.await(Math.max(deadline - System.currentTimeMillis(), 1), TimeUnit.MILLISECONDS)) {
            exit(3);
        }
        boolean sent = true;
        for (String level : levels) {
            for (int i = 0; i < perLevel; i++) {
                Message m = new Message(topic, "Later",
                    ("delayed level " + level + " #" + i).getBytes(StandardCharsets.UTF_8));
                m.setDelayTimeLevel(Integer.parseInt(level));
                sent &= send(producer, m, Integer.parseInt(level));
            }
        }
        boolean done = sent && delayed.await(Math.max(deadline - System.currentTimeMillis(), 1), TimeUnit.MILLISECONDS);
        Thread.sleep(2000);  // duplicates would show up here
        JavaConsumer.shutdown(consumer::shutdown);
        producer.shutdown();
        exit(!sent ? 2 : done ? 0 : 3);
    }

    static boolean send(DefaultMQProducer producer, Message m, int level) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", "send");
        line.put("level", level);
        long sentAt = System.currentTimeMillis();
        boolean ok = true;
        try {
            SendResult r = producer.send(m);
            line.put("msgId", r.getMsgId());
            line.put("status", String.valueOf(r.getSendStatus()));
        } catch (Exception e) {
            ok = false;
            line.put("status", "EXCEPTION");
            line.put("error", e.toString());
        }
        line.put("sentAt", sentAt);
        line.put("bodySha256", JavaProducer.sha256(m.getBody()));
        print(line);
        return ok;
    }

    static synchronized void print(Map<String, Object> line) {
        OUT.print(Json.write(line));
        OUT.print('\n');
        OUT.flush();
    }

    static void exit(int code) {
        OUT.flush();
        Runtime.getRuntime().halt(code);
    }
}
