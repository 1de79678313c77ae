import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A real RocketMQ 4.9.8 TransactionMQProducer whose local transaction stays open: the broker has to ask back.
 *
 * Usage: {@code java JavaTransactionProducer namesrv=HOST:PORT topic=T group=G count=N
 * [checks=UNKNOW,COMMIT] [timeoutMs=60000]}. N messages (body "tx body i", tag "Tx", key "tx-i") are sent with
 * {@code sendMessageInTransaction}; executeLocalTransaction answers UNKNOW for each, so the producer's
 * END_TRANSACTION leaves them open. Each CHECK_TRANSACTION_STATE the broker sends is answered with the next
 * state of {@code checks} for that message (the last one repeats; UNKNOW, COMMIT or ROLLBACK).
 *
 * One JSON line per send ({@code "event":"send"}: msgId, status, localTransactionState, bodySha256) and per check
 * ({@code "event":"check"}: msgId, transactionId, topic, queueId, checkTimes — the TRANSACTION_CHECK_TIMES property
 * the broker sent — bodySha256, answer). Once every message got a final answer (not UNKNOW) the program waits 1 s
 * (END_TRANSACTION is oneway) and exits 0; 3 when the timeout passes first, 2 when a send failed.
 */
public final class JavaTransactionProducer {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaTransactionProducer() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = JavaConsumer.parseArgs(argv);
        int count = Integer.parseInt(args.get("count"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeoutMs", "60000"));
        List<String> answers = Arrays.asList(args.getOrDefault("checks", "COMMIT").split(","));
        Map<String, AtomicInteger> checksSeen = new ConcurrentHashMap<>();
        CountDownLatch finished = new CountDownLatch(count);

        TransactionMQProducer producer = new TransactionMQProducer(args.get("group"));
        producer.setNamesrvAddr(args.get("namesrv"));
        producer.setInstanceName("hareplica-tx-" + ProcessHandle.current().pid());
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10000);
        producer.setHeartbeatBrokerInterval(1000);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int n = checksSeen.computeIfAbsent(msg.getTransactionId(), k -> new AtomicInteger()).getAndIncrement();
                LocalTransactionState answer = state(answers.get(Math.min(n, answers.size() - 1)));
                Map<String, Object> line = JavaConsumer.deliveryLine(msg);
                line.put("event", "check");
                line.put("transactionId", msg.getTransactionId());
                line.put("checkTimes", msg.getProperty(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES));
                line.put("answer", answer.name());
                print(line);
                if (answer != LocalTransactionState.UNKNOW) {
                    finished.countDown();
                }
                return answer;
            }
        });
        producer.start();
        boolean sendFailed = false;
        try {
            for (int i = 0; i < count; i++) {
                Message m = new Message(args.get("topic"), "Tx", "tx-" + i,
                    ("tx body " + i).getBytes(StandardCharsets.UTF_8));
                Map<String, Object> line = new java.util.LinkedHashMap<>();
                line.put("event", "send");
                try {
                    TransactionSendResult r = producer.sendMessageInTransaction(m, null);
                    line.put("msgId", r.getMsgId());
                    line.put("status", String.valueOf(r.getSendStatus()));
                    line.put("localTransactionState", String.valueOf(r.getLocalTransactionState()));
                } catch (Exception e) {
                    sendFailed = true;
                    line.put("status", "EXCEPTION");
                    line.put("error", e.toString());
                }
                line.put("bodySha256", JavaProducer.sha256(m.getBody()));
                print(line);
            }
            boolean done = !sendFailed && finished.await(timeoutMs, TimeUnit.MILLISECONDS);
            Thread.sleep(1000);  // the last END_TRANSACTION is oneway: let it leave before the channel closes
            OUT.flush();
            Runtime.getRuntime().halt(sendFailed ? 2 : done ? 0 : 3);
        } finally {
            producer.shutdown();
        }
    }

    /** UNKNOW, COMMIT or ROLLBACK as the client's LocalTransactionState. */
    static LocalTransactionState state(String name) {
        switch (name) {
            case "COMMIT":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "ROLLBACK":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            case "UNKNOW":
                return LocalTransactionState.UNKNOW;
            default:
                throw new IllegalArgumentException("check answer must be UNKNOW, COMMIT or ROLLBACK, not " + name);
        }
    }

    static synchronized void print(Map<String, Object> line) {
        OUT.print(Json.write(line));
        OUT.print('\n');
        OUT.flush();
    }
}
