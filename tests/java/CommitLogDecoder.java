import java.io.BufferedOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Decodes every message of a CommitLog folder with RocketMQ's own {@code MessageDecoder} and prints one JSON
 * line per message, with the fields, order and formatting of {@code hareplica inspect-commitlog} (and of
 * tests/fixtures/rocketmq-4.9.8/messages.jsonl).
 *
 * Usage: {@code java CommitLogDecoder COMMITLOG_DIR}. Files are the 20-digit mapped files in name order; each
 * is walked from its start: TOTALSIZE and MAGICCODE are read at each position, a message record is decoded twice
 * ({@code decode(buf, true, false)} for the stored body, {@code decode(buf, true, true)} for the inflated one),
 * an END_FILE blank moves to the next file, TOTALSIZE 0 with MAGICCODE 0 ends the data (docs/real_peers.md,
 * "Real Java clients"). Exit code 0; 2 (message on stderr naming offset and file) when a record cannot be
 * decoded; 1 for a bad folder.
 */
public final class CommitLogDecoder {
    static final int MESSAGE_MAGIC_CODE = -626843481;
    /** RocketMQ 5.x MessageVersion V2: a 2-byte TOPIC length (only 5.x's MessageDecoder decodes it). */
    static final int MESSAGE_MAGIC_CODE_V2 = -626843477;
    static final int BLANK_MAGIC_CODE = -875286124;
    static final int BORNHOST_V6_FLAG = 0x1 << 4;
    static final int STOREHOST_V6_FLAG = 0x1 << 5;

    private CommitLogDecoder() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: CommitLogDecoder COMMITLOG_DIR");
            System.exit(1);
        }
        File dir = new File(args[0]);
        File[] listed = dir.listFiles((d, name) -> name.length() == 20 && name.chars().allMatch(Character::isDigit));
        if (listed == null) {
            System.err.println("error: CommitLog folder " + dir + " does not exist");
            System.exit(1);
        }
        Arrays.sort(listed);
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, "UTF-8");
        int code = 0;
        files:
        for (File file : listed) {
            long fileStart = Long.parseLong(file.getName());
            try (RandomAccessFile raf = new RandomAccessFile(file, "r"); FileChannel ch = raf.getChannel()) {
                MappedByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                int pos = 0;
                while (pos + 8 <= buf.limit()) {
                    int totalSize = buf.getInt(pos);
                    int magic = buf.getInt(pos + 4);
                    if (totalSize == 0 && magic == 0) {
                        break files;
                    }
                    if (magic == BLANK_MAGIC_CODE) {
                        continue files;
                    }
                    if ((magic != MESSAGE_MAGIC_CODE && magic != MESSAGE_MAGIC_CODE_V2) || totalSize <= 0 || pos + totalSize > buf.limit()) {
                        out.flush();
                        System.err.println("error: no message record at CommitLog offset " + (fileStart + pos)
                            + " (file " + file.getName() + ", TOTALSIZE " + totalSize + ", MAGICCODE " + magic + ")");
                        code = 2;
                        break files;
                    }
                    Map<String, Object> row = record(buf, pos, totalSize, file.getName(), fileStart);
                    if (row == null) {
                        out.flush();
                        System.err.println("error: MessageDecoder could not decode the record at CommitLog offset "
                            + (fileStart + pos) + " (file " + file.getName() + ")");
                        code = 2;
                        break files;
                    }
                    out.print(Json.write(row));
                    out.print('\n');
                    pos += totalSize;
                }
            }
        }
        out.flush();
        System.exit(code);
    }

    /** One message as a JSON object (insertion order = inspect-commitlog's), or null when decode fails. */
    static Map<String, Object> record(ByteBuffer file, int pos, int size, String name, long fileStart) {
        ByteBuffer slice = file.duplicate();
        slice.position(pos).limit(pos + size);
        MessageExt stored = MessageDecoder.decode(slice.slice(), true, false);
        slice.position(pos);
        MessageExt inflated = MessageDecoder.decode(slice.slice(), true, true);
        if (stored == null || inflated == null) {
            return null;
        }
        Map<String, String> props = stored.getProperties();
        Map<String, Object> sortedProps = new LinkedHashMap<>();
        for (String k : Json.sortedKeys(props)) {
            sortedProps.put(k, props.get(k));
        }
        byte[] body = stored.getBody() == null ? new byte[0] : stored.getBody();
        byte[] inflatedBody = inflated.getBody() == null ? new byte[0] : inflated.getBody();
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("file", name);
        row.put("filePosition", pos);
        row.put("commitLogOffset", stored.getCommitLogOffset());
        row.put("storeSize", stored.getStoreSize());
        row.put("magic", file.getInt(pos + 4));
        row.put("bodyCRC", stored.getBodyCRC());
        row.put("queueId", stored.getQueueId());
        row.put("flag", stored.getFlag());
        row.put("queueOffset", stored.getQueueOffset());
        row.put("sysFlag", stored.getSysFlag());
        row.put("bornTimestamp", stored.getBornTimestamp());
        row.put("bornHost", host((InetSocketAddress) stored.getBornHost()));
        row.put("storeTimestamp", stored.getStoreTimestamp());
        row.put("storeHost", host((InetSocketAddress) stored.getStoreHost()));
        row.put("reconsumeTimes", stored.getReconsumeTimes());
        row.put("preparedTransactionOffset", stored.getPreparedTransactionOffset());
        row.put("topic", stored.getTopic());
        row.put("properties", sortedProps);
        row.put("propertiesRawBase64", Base64.getEncoder().encodeToString(rawProperties(file, pos, stored, body)));
        row.put("tags", stored.getTags());
        row.put("keys", stored.getKeys());
        row.put("msgId", stored.getMsgId());
        row.put("uniqKey", stored.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
        row.put("bodyLength", body.length);
        row.put("bodyBase64", Base64.getEncoder().encodeToString(body));
        row.put("bodyDecompressedBase64", Base64.getEncoder().encodeToString(inflatedBody));
        return row;
    }

    /**
     * The stored properties bytes. MessageDecoder keeps only the parsed map, so their position is computed from
     * what it decoded: the fixed fields, the host lengths (sysFlag V6 bits), the stored body and the topic.
     */
    static byte[] rawProperties(ByteBuffer file, int pos, MessageExt stored, byte[] body) {
        int topicLengthBytes = file.getInt(pos + 4) == MESSAGE_MAGIC_CODE_V2 ? 2 : 1;
        int sysFlag = stored.getSysFlag();
        int bornHost = ((sysFlag & BORNHOST_V6_FLAG) == 0 ? 4 : 16) + 4;
        int storeHost = ((sysFlag & STOREHOST_V6_FLAG) == 0 ? 4 : 16) + 4;
        int fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + bornHost + 8 + storeHost + 4 + 8;
        int at = pos + fixed + 4 + body.length + topicLengthBytes + stored.getTopic().getBytes(StandardCharsets.UTF_8).length;
        int length = file.getShort(at);
        byte[] raw = new byte[Math.max(length, 0)];
        ByteBuffer view = file.duplicate();
        view.position(at + 2);
        view.get(raw);
        return raw;
    }

    static String host(InetSocketAddress addr) {
        return addr.getAddress().getHostAddress() + ":" + addr.getPort();
    }

}
