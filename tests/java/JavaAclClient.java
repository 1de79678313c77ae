import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Sends (and consumes) with the real RocketMQ 4.9.8 client under {@code AclClientRPCHook}, one JSON line per case.
 *
 * Usage: {@code java JavaAclClient namesrv=HOST:PORT cases=NAME:AK:SK:TOPIC;... [consume=AK:SK:TOPIC:GROUP:N]}.
 * An AK of {@code -} means no hook (an unsigned client). Each case sends one message with its own producer
 * (retries off) and prints {@code case, status} or {@code case, status=EXCEPTION, code, error} (the broker's
 * response code and remark). {@code consume} then polls TOPIC as GROUP with a lite-pull consumer until N
 * messages came or 30 s passed and prints {@code case=consume, count, bodies}. Exit code 0.
 */
public final class JavaAclClient {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaAclClient() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            args.put(a.substring(0, eq), a.substring(eq + 1));
        }
        int n = 0;
        for (String c : args.get("cases").split(";")) {
            String[] p = c.split(":", 4);
            send(args.get("namesrv"), p[0], hook(p[1], p[2]), p[3], n++);
        }
        if (args.containsKey("consume")) {
            String[] p = args.get("consume").split(":", 5);
            consume(args.get("namesrv"), hook(p[0], p[1]), p[2], p[3], Integer.parseInt(p[4]));
        }
        OUT.flush();
        System.exit(0);
    }

    static RPCHook hook(String ak, String sk) {
        return "-".equals(ak) ? null : new AclClientRPCHook(new SessionCredentials(ak, sk));
    }

    static void send(String namesrv, String name, RPCHook hook, String topic, int n) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("acl_pg_" + n, hook);
        producer.setNamesrvAddr(namesrv);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10000);
        producer.setInstanceName("acl-" + ProcessHandle.current().pid() + "-" + n);
        producer.start();
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("case", name);
        try {
            SendResult r = producer.send(new Message(topic, ("body-" + name).getBytes(StandardCharsets.UTF_8)));
            line.put("status", r.getSendStatus().name());
        } catch (MQBrokerException e) {
            exception(line, e.getResponseCode(), e.getErrorMessage());
        } catch (MQClientException e) {
            Throwable cause = e.getCause();
            if (cause instanceof MQBrokerException) {
                MQBrokerException b = (MQBrokerException) cause;
                exception(line, b.getResponseCode(), b.getErrorMessage());
            } else {
                exception(line, e.getResponseCode(), e.getErrorMessage());
            }
        } finally {
            producer.shutdown();
        }
        OUT.println(Json.write(line));
    }

    static void exception(Map<String, Object> line, int code, String error) {
        line.put("status", "EXCEPTION");
        line.put("code", code);
        line.put("error", error);
    }

    static void consume(String namesrv, RPCHook hook, String topic, String group, int count) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group, hook);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("acl-consumer-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.start();
        long deadline = System.currentTimeMillis() + 30000;
        StringBuilder bodies = new StringBuilder();
        int seen = 0;
        while (seen < count && System.currentTimeMillis() < deadline) {
            List<MessageExt> msgs = consumer.poll(500);
            for (MessageExt m : msgs) {
                bodies.append(seen++ == 0 ? "" : ",").append(new String(m.getBody(), StandardCharsets.UTF_8));
            }
        }
        Thread t = new Thread(consumer::shutdown, "consumer-shutdown");
        t.setDaemon(true);
        t.start();
        t.join(5000);
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("case", "consume");
        line.put("count", seen);
        line.put("bodies", bodies.toString());
        OUT.println(Json.write(line));
    }
}
