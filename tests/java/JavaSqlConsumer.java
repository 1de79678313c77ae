import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * Starts a real RocketMQ 4.9.8 consumer with an SQL92 subscription ({@code MessageSelector.bySql}) and reports
 * whether the broker let it start.
 *
 * Usage: {@code java JavaSqlConsumer mode=push|litepull namesrv=HOST:PORT topic=T group=G sql=EXPR}. The client
 * asks the topic's broker with CHECK_CLIENT_CONFIG while starting; a broker without property filtering refuses
 * and {@code start()} throws. Prints one JSON line: mode, started (true/false), responseCode and errorMessage of
 * the MQClientException (null when started). Exits 0 either way.
 */
public final class JavaSqlConsumer {
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private JavaSqlConsumer() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = JavaConsumer.parseArgs(argv);
        String mode = args.get("mode");
        MessageSelector selector = MessageSelector.bySql(args.get("sql"));
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("mode", mode);
        Runnable shutdown;
        try {
            if ("push".equals(mode)) {
                DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
                consumer.setNamesrvAddr(args.get("namesrv"));
                consumer.setInstanceName("hareplica-sql-" + ProcessHandle.current().pid());
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                consumer.subscribe(args.get("topic"), selector);
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) ->
                    ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
                shutdown = consumer::shutdown;
                consumer.start();
            } else if ("litepull".equals(mode)) {
                DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args.get("group"));
                consumer.setNamesrvAddr(args.get("namesrv"));
                consumer.setInstanceName("hareplica-sql-" + ProcessHandle.current().pid());
                consumer.subscribe(args.get("topic"), selector);
                shutdown = consumer::shutdown;
                consumer.start();
            } else {
                throw new IllegalArgumentException("mode must be push or litepull, not " + mode);
            }
            line.put("started", true);
            line.put("responseCode", null);
            line.put("errorMessage", null);
            JavaConsumer.shutdown(shutdown);
        } catch (MQClientException e) {
            line.put("started", false);
            line.put("responseCode", e.getResponseCode());
            line.put("errorMessage", e.getErrorMessage());
        }
        OUT.print(Json.write(line));
        OUT.print('\n');
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }
}
