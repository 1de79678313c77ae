import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Sends a fixed mix of messages with the real RocketMQ 4.9.8 client and prints one JSON line per SendResult.
 *
 * Usage: {@code java JavaProducer namesrv=HOST:PORT topic=T group=G [cases=single,tagskeys,batch,compressed,
 * delayed,transaction] [seed=N]} (transaction: two sends whose local transaction commits, then one that rolls
 * back). Compression type and header serialisation come from the client's own system properties ({@code -Drocketmq.message.compressType=ZLIB|LZ4|ZSTD}, {@code -Drocketmq.serialize.type=JSON|ROCKETMQ}).
 * Retries are off (one attempt per send), so a failed send is an exception, printed as a line with
 * {@code "status":"EXCEPTION"}; the exit code is 0 when every send returned, 2 otherwise.
 *
 * Each line: case, status, msgId (the client's unique ids; comma-joined for a batch), offsetMsgId (the broker's),
 * brokerName, queueId, queueOffset, compressType, serializeType, and messages: per message sent its uniqKey,
 * topic, tags, keys, userProperties, delayTimeLevel, bodyLength and bodySha256 (of the body before compression).
 */
public final class JavaProducer {
    private static final Map<String, String> ARGS = new HashMap<>();
    private static Random random;
    private static boolean failed;
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaProducer() {
    }

    public static void main(String[] argv) throws Exception {
        for (String a : argv) {
            int eq = a.indexOf('=');
            ARGS.put(a.substring(0, eq), a.substring(eq + 1));
        }
        random = new Random(Long.parseLong(ARGS.getOrDefault("seed", "20261124")));
        String topic = ARGS.get("topic");
        List<String> cases = Arrays.asList(
            ARGS.getOrDefault("cases", "single,tagskeys,batch,compressed,delayed,transaction").split(","));

        DefaultMQProducer producer = new DefaultMQProducer(ARGS.get("group"));
        configure(producer);
        producer.start();
        try {
            if (cases.contains("transaction")) {  // first: its oneway END_TRANSACTION goes out long before shutdown
                transactions(topic);
            }
            if (cases.contains("single")) {
                for (int i = 0; i < 3; i++) {
                    send(producer, "single", message(topic, null, null, 16 + 500 * i, false));
                }
            }
            if (cases.contains("tagskeys")) {
                for (int i = 0; i < 3; i++) {
                    Message m = message(topic, "Tag" + i, Arrays.asList("order-" + i, "客户-" + i), 100 + i, false);
                    m.putUserProperty("color", "grün-值 = : " + i);
                    m.putUserProperty("名前", "ünïcødé-" + i);
                    m.setFlag(7 * i);
                    send(producer, "tagskeys", m);
                }
            }
            if (cases.contains("batch")) {
                List<Message> batch = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    Message m = message(topic, "BatchTag", Arrays.asList("batch-" + i), 50 + 10 * i, false);
                    m.putUserProperty("batchIndex", "第" + i);
                    batch.add(m);
                }
                sendBatch(producer, batch);
            }
            if (cases.contains("compressed")) {
                int[] sizes = {4096, 9000, 70000};
                for (int size : sizes) {
                    send(producer, "compressed", message(topic, "Big", Arrays.asList("big-" + size), size, true));
                }
            }
            if (cases.contains("delayed")) {
                for (int level = 1; level <= 2; level++) {
                    Message m = message(topic, "Later", null, 64, false);
                    m.setDelayTimeLevel(level);
                    send(producer, "delayed", m);
                }
            }
        } finally {
            producer.shutdown();
        }
        OUT.flush();
        System.exit(failed ? 2 : 0);
    }

    static void configure(DefaultMQProducer producer) {
        producer.setNamesrvAddr(ARGS.get("namesrv"));
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10000);
        producer.setInstanceName("hareplica-" + ProcessHandle.current().pid());
    }

    static void transactions(String topic) throws Exception {
        TransactionMQProducer tx = new TransactionMQProducer(ARGS.get("group") + "_tx");
        configure(tx);
        tx.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "rollback".equals(msg.getUserProperty("outcome"))
                    ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        tx.start();
        try {
            for (int i = 0; i < 3; i++) {  // the third one rolls back
                Message m = message(topic, "Tx", Arrays.asList("tx-" + i), 80, false);
                m.putUserProperty("outcome", i < 2 ? "commit" : "rollback");
                Map<String, Object> line = header("transaction");
                try {
                    TransactionSendResult r = tx.sendMessageInTransaction(m, null);
                    result(line, r);
                    line.put("localTransactionState", String.valueOf(r.getLocalTransactionState()));
                } catch (Exception e) {
                    exception(line, e);
                }
                line.put("messages", Arrays.asList(describe(m)));
                print(line);
            }
            Thread.sleep(500);  // END_TRANSACTION is oneway: let it leave before the channel closes
        } finally {
            tx.shutdown();
        }
    }

    static void send(DefaultMQProducer producer, String name, Message m) {
        Map<String, Object> line = header(name);
        try {
            result(line, producer.send(m));
        } catch (Exception e) {
            exception(line, e);
        }
        line.put("messages", Arrays.asList(describe(m)));
        print(line);
    }

    static void sendBatch(DefaultMQProducer producer, List<Message> batch) {
        Map<String, Object> line = header("batch");
        try {
            result(line, producer.send(batch));
        } catch (Exception e) {
            exception(line, e);
        }
        List<Object> described = new ArrayList<>();
        for (Message m : batch) {
            described.add(describe(m));
        }
        line.put("messages", described);
        print(line);
    }

    static Map<String, Object> header(String name) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("case", name);
        line.put("compressType", System.getProperty("rocketmq.message.compressType", "ZLIB"));
        line.put("serializeType", String.valueOf(RemotingCommand.getSerializeTypeConfigInThisServer()));
        return line;
    }

    static void result(Map<String, Object> line, SendResult r) {
        line.put("status", String.valueOf(r.getSendStatus()));
        line.put("msgId", r.getMsgId());
        line.put("offsetMsgId", r.getOffsetMsgId());
        line.put("brokerName", r.getMessageQueue().getBrokerName());
        line.put("queueId", r.getMessageQueue().getQueueId());
        line.put("queueOffset", r.getQueueOffset());
    }

    static void exception(Map<String, Object> line, Exception e) {
        failed = true;
        line.put("status", "EXCEPTION");
        line.put("error", e.toString());
        e.printStackTrace();
    }

    static Message message(String topic, String tags, List<String> keys, int size, boolean compressible) {
        byte[] body = new byte[size];
        if (compressible) {
            byte[] text = "hareplica rocketmq commitlog 数据 ".getBytes(StandardCharsets.UTF_8);
            for (int i = 0; i < size; i++) {
                body[i] = i % 97 == 0 ? (byte) random.nextInt(256) : text[i % text.length];
            }
        } else {
            random.nextBytes(body);
        }
        Message m = new Message(topic, body);
        if (tags != null) {
            m.setTags(tags);
        }
        if (keys != null) {
            m.setKeys(keys);
        }
        return m;
    }

    static Map<String, Object> describe(Message m) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("uniqKey", MessageClientIDSetter.getUniqID(m));
        d.put("topic", m.getTopic());
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        Map<String, Object> user = new LinkedHashMap<>();
        for (String k : new String[] {"color", "名前", "batchIndex", "outcome"}) {
            if (m.getUserProperty(k) != null) {
                user.put(k, m.getUserProperty(k));
            }
        }
        d.put("userProperties", user);
        d.put("flag", m.getFlag());
        d.put("delayTimeLevel", m.getDelayTimeLevel());
        d.put("bodyLength", m.getBody().length);
        d.put("bodySha256", sha256(m.getBody()));
        return d;
    }

    static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", b & 0xff));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static synchronized void print(Map<String, Object> line) {
        OUT.print(Json.write(line));
        OUT.print('\n');
        OUT.flush();
    }
}
