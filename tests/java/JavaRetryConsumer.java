import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A real RocketMQ 4.9.8 push consumer whose listener asks for redelivery (RECONSUME_LATER) before it accepts.
 *
 * Usage: {@code java JavaRetryConsumer namesrv=HOST:PORT topic=T group=G count=N failTimes=F
 * [maxReconsumeTimes=M] [timeoutMs=90000]}. A delivery whose reconsumeTimes is below F is answered
 * RECONSUME_LATER (F = -1: every delivery), the others CONSUME_SUCCESS; the client then hands the message back to
 * the broker (CONSUMER_SEND_MSG_BACK) and consumes it again from the group's retry topic. M sets the consumer's
 * maxReconsumeTimes (the client default is 16). A new group starts at the first offset; the name server is asked
 * for routes every second, so the retry topic created by the first heartbeat is found soon.
 *
 * One JSON line per delivery: JavaConsumer's fields (msgId, offsetMsgId, topic — as the client hands it over: the
 * original topic also for retried copies — queueId, queueOffset, reconsumeTimes, bodyLength, bodySha256), the
 * answer given ("status") and the message's properties. After N deliveries the program waits until every delivered
 * message was handed back or acknowledged (its process queues are empty, at most 15 s), then exits 0; 3 when the
 * timeout passes first.
 */
public final class JavaRetryConsumer {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaRetryConsumer() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = JavaConsumer.parseArgs(argv);
        int count = Integer.parseInt(args.get("count"));
        int failTimes = Integer.parseInt(args.get("failTimes"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeoutMs", "90000"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("hareplica-retry-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        if (args.containsKey("maxReconsumeTimes")) {
            consumer.setMaxReconsumeTimes(Integer.parseInt(args.get("maxReconsumeTimes")));
        }
        consumer.subscribe(args.get("topic"), "*");
        CountDownLatch latch = new CountDownLatch(count);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            ConsumeConcurrentlyStatus status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            for (MessageExt m : msgs) {
                if (failTimes < 0 || m.getReconsumeTimes() < failTimes) {
                    status = ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            for (MessageExt m : msgs) {
                print(m, status);
                latch.countDown();
            }
            return status;
        });
        consumer.start();
        boolean done = latch.await(timeoutMs, TimeUnit.MILLISECONDS);
        if (done) {
            awaitProcessed(consumer, 15000);
        }
        JavaConsumer.shutdown(consumer::shutdown);
        OUT.flush();
        Runtime.getRuntime().halt(done ? 0 : 3);
    }

    /** Wait until no process queue holds a message: every delivery was acknowledged or handed back. */
    static void awaitProcessed(DefaultMQPushConsumer consumer, long maxMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + maxMs;
        while (System.currentTimeMillis() < deadline) {
            long held = 0;
            for (ProcessQueue pq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable()
                .values()) {
                held += pq.getMsgCount().get();
            }
            if (held == 0) {
                return;
            }
            Thread.sleep(50);
        }
    }

    static synchronized void print(MessageExt m, ConsumeConcurrentlyStatus status) {
        Map<String, Object> line = JavaConsumer.deliveryLine(m);
        line.put("status", status.name());
        line.put("properties", new TreeMap<>(m.getProperties()));
        OUT.print(Json.write(line));
        OUT.print('\n');
        OUT.flush();
    }
}
