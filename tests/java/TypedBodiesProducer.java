import com.google.protobuf.ByteString;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
import com.google.protobuf.DynamicMessage;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.apache.avro.Conversions;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericEnumSymbol;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.GenericRecordBuilder;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Typed message bodies made by the reference implementations (Apache Avro's Java library, protobuf-java), sent with
 * the real RocketMQ 4.9.8 producer, each printed with the values that library reads back from the bytes it sent.
 * tests/interop/test_java_typed_bodies.py compares them with the typed columns `hareplica run tables` lands.
 *
 * <p>Usage (arguments key=value): {@code namesrv=HOST:PORT group=G seed=N start=I [maxTime=micros]}, then for Avro
 * {@code avroTopic=T avro=v1.avsc,v2.avsc,v3.avsc send=1:40,2:20 reader=2 known=1,2}: {@code send} sends that many
 * records of each version (1-based, into {@code avro}), interleaved; each is built with GenericRecordBuilder from
 * values generated from its schema (every third kind of record: extremes, zeros/nulls/defaults, random) and encoded
 * with {@code BinaryMessageEncoder} (single-object encoding: C3 01, the CRC-64-AVRO fingerprint, the datum). The
 * reference read is {@code BinaryMessageDecoder} with reader schema {@code reader} that knows the versions
 * {@code known}; a writer version it does not know is also decoded by one that knows only that version, to show
 * whether it resolves to the reader at all. Logical types are read through Avro's own conversions (Instant,
 * LocalDate, LocalDateTime, LocalTime, BigDecimal, UUID). For Protobuf {@code protoTopic=T desc=FILE
 * message=pkg.Name proto=N}: a FileDescriptorSet, N messages built with DynamicMessage, {@code toByteArray()},
 * read back with {@code DynamicMessage.parseFrom}.
 *
 * <p>stdout, JSON lines: first {@code {"kind":"fingerprints", "<file>": hex}} (each Avro version's
 * parsingFingerprint64 as the 8 little-endian header bytes), then one line per send: kind, version, index, status,
 * msgId (the client's), offsetMsgId, queueId, queueOffset, bodyHex, reference (the value read back, or null) and
 * referenceError / resolveError. Values in the reference: records and messages as objects; strings, booleans and
 * ints as themselves; floats as the exact double; bytes and fixed as {"$bytes": hex}; a timestamp as {"$instant":
 * micros since the epoch} ({"$instantNanos": nanos} when it has sub-microsecond digits), or {"$seconds", "$nanos"}
 * for google.protobuf.Timestamp; local timestamps as {"$local": micros} (or {"$localNanos"}); a date as {"$date": epoch day}; a time as {"$time": nano of day}; a decimal as {"$decimal": plain text};
 * maps as {"$entries": [[key, value], ...]}; protobuf's unsigned ints as their unsigned value; an enum number no
 * value declares as its number in text. Exit code 0 when every send was SEND_OK, 2 otherwise.
 */
public final class TypedBodiesProducer {
    private static final Map<String, String> ARGS = new HashMap<>();
    private static final PrintStream OUT =
        new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final GenericData MODEL = new GenericData();
    private static boolean failed;

    static {
        MODEL.addLogicalTypeConversion(new TimeConversions.DateConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.TimeMillisConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.TimeMicrosConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.TimestampMillisConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.TimestampMicrosConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.LocalTimestampMillisConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.LocalTimestampMicrosConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.TimestampNanosConversion());
        MODEL.addLogicalTypeConversion(new TimeConversions.LocalTimestampNanosConversion());
        MODEL.addLogicalTypeConversion(new Conversions.DecimalConversion());
        MODEL.addLogicalTypeConversion(new Conversions.UUIDConversion());
    }

    private TypedBodiesProducer() {
    }

    public static void main(String[] argv) throws Exception {
        for (String a : argv) {
            int eq = a.indexOf('=');
            ARGS.put(a.substring(0, eq), a.substring(eq + 1));
        }
        DefaultMQProducer producer = new DefaultMQProducer(ARGS.getOrDefault("group", "typed_bodies"));
        producer.setNamesrvAddr(ARGS.get("namesrv"));
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10000);
        producer.setInstanceName("hareplica-" + ProcessHandle.current().pid());
        producer.start();
        try {
            if (ARGS.containsKey("avro")) {
                avro(producer);
            }
            if (ARGS.containsKey("desc")) {
                protobuf(producer);
            }
        } finally {
            producer.shutdown();
        }
        OUT.flush();
        System.exit(failed ? 2 : 0);
    }

    // ---------------------------------------------------------------- Avro

    static void avro(DefaultMQProducer producer) throws Exception {
        List<String> files = List.of(ARGS.get("avro").split(","));
        List<Schema> versions = new ArrayList<>();
        Map<String, Object> fingerprints = new LinkedHashMap<>();
        fingerprints.put("kind", "fingerprints");
        for (String file : files) {
            Schema schema = new Schema.Parser().parse(Files.readString(Paths.get(file)));
            versions.add(schema);
            long fp = SchemaNormalization.parsingFingerprint64(schema);
            byte[] le = ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(fp).array();
            fingerprints.put(Paths.get(file).getFileName().toString(), hex(le));
        }
        print(fingerprints);
        Schema reader = versions.get(Integer.parseInt(ARGS.get("reader")) - 1);
        BinaryMessageDecoder<GenericRecord> decoder = new BinaryMessageDecoder<>(MODEL, reader);
        List<Integer> known = new ArrayList<>();
        for (String k : ARGS.get("known").split(",")) {
            known.add(Integer.parseInt(k));
            decoder.addSchema(versions.get(Integer.parseInt(k) - 1));
        }
        // the plan, interleaved: one of each version in turn while any is left
        List<int[]> plan = new ArrayList<>();
        for (String part : ARGS.get("send").split(",")) {
            String[] vc = part.split(":");
            plan.add(new int[] {Integer.parseInt(vc[0]), Integer.parseInt(vc[1])});
        }
        int index = Integer.parseInt(ARGS.getOrDefault("start", "0"));
        long seed = Long.parseLong(ARGS.getOrDefault("seed", "52"));
        String topic = ARGS.get("avroTopic");
        for (boolean left = true; left; ) {
            left = false;
            for (int[] vc : plan) {
                if (vc[1] == 0) {
                    continue;
                }
                vc[1]--;
                left = true;
                int version = vc[0];
                Schema writer = versions.get(version - 1);
                Random random = new Random(seed * 1_000_003L + index);
                GenericRecord record = (GenericRecord) value(writer, random, index % 3, index);
                byte[] body = toArray(new BinaryMessageEncoder<GenericRecord>(MODEL, writer).encode(record));
                Message m = new Message(topic, "v" + version, "P-" + index, body);
                m.putUserProperty("schemaVersion", String.valueOf(version));
                Map<String, Object> line = header("avro", "v" + version, index, body);
                send(producer, m, line);
                try {
                    line.put("reference", ref(decoder.decode(body)));
                    line.put("referenceError", null);
                } catch (Exception e) {
                    line.put("reference", null);
                    line.put("referenceError", e.toString());
                }
                if (!known.contains(version)) {  // does the writer resolve to the reader at all?
                    BinaryMessageDecoder<GenericRecord> alone = new BinaryMessageDecoder<>(MODEL, reader);
                    alone.addSchema(writer);
                    try {
                        alone.decode(body);
                        line.put("resolveError", null);
                    } catch (Exception e) {
                        line.put("resolveError", e.toString());
                    }
                }
                print(line);
                index++;
            }
        }
    }

    /** A value of {@code schema}: kind 0 extremes, 1 zeros / empties / nulls / defaults, 2 random. */
    static Object value(Schema schema, Random r, int kind, int index) {
        LogicalType logical = schema.getLogicalType();
        if (logical != null) {
            return logicalValue(schema, logical, r, kind, index);
        }
        switch (schema.getType()) {
            case RECORD:
                GenericRecordBuilder b = new GenericRecordBuilder(schema);
                for (Schema.Field f : schema.getFields()) {
                    if (kind == 1 && f.hasDefaultValue()) {
                        continue;  // the builder takes the schema's default
                    }
                    b.set(f, value(f.schema(), r, kind, index));
                }
                return b.build();
            case UNION:
                Schema branch = null;
                for (Schema s : schema.getTypes()) {
                    if (s.getType() != Schema.Type.NULL) {
                        branch = s;
                    }
                }
                if (kind == 1 || (kind == 2 && r.nextBoolean())) {
                    return null;
                }
                return value(branch, r, kind, index);
            case STRING:
                if (kind == 0) {
                    return index % 2 == 0 ? "ü日本語🎉 \u0000\t\"\\ end" : "x".repeat(700) + "语";
                }
                return kind == 1 ? "" : randomText(r);
            case BYTES:
                return ByteBuffer.wrap(bytes(r, kind, 256));
            case FIXED:
                return new GenericData.Fixed(schema, fixedBytes(r, kind, schema.getFixedSize()));
            case INT:
                return kind == 0 ? (index % 2 == 0 ? Integer.MIN_VALUE : Integer.MAX_VALUE) : kind == 1 ? 0 : r.nextInt();
            case LONG:
                return kind == 0 ? (index % 2 == 0 ? Long.MIN_VALUE : Long.MAX_VALUE) : kind == 1 ? 0L : r.nextLong();
            case FLOAT:
                float[] fx = {Float.NaN, Float.POSITIVE_INFINITY, -0.0f, Float.MIN_VALUE, -Float.MAX_VALUE};
                return kind == 0 ? fx[(index / 3) % fx.length] : kind == 1 ? 0.0f : (r.nextFloat() - 0.5f) * 1e6f;
            case DOUBLE:
                double[] dx = {Double.NEGATIVE_INFINITY, Double.MIN_VALUE, -0.0, Double.MAX_VALUE, Double.NaN};
                return kind == 0 ? dx[(index / 3) % dx.length] : kind == 1 ? 0.0 : r.nextGaussian() * 1e9;
            case BOOLEAN:
                return kind == 0 || (kind == 2 && r.nextBoolean());
            case ENUM:
                List<String> symbols = schema.getEnumSymbols();
                String symbol = kind == 0 ? symbols.get(symbols.size() - 1)
                    : kind == 1 ? symbols.get(0) : symbols.get(r.nextInt(symbols.size()));
                return new GenericData.EnumSymbol(schema, symbol);
            case ARRAY:
                List<Object> items = new ArrayList<>();
                int n = kind == 0 ? 3 : kind == 1 ? 0 : r.nextInt(4);
                for (int i = 0; i < n; i++) {
                    items.add(value(schema.getElementType(), r, kind, index + i));
                }
                return items;
            case MAP:
                Map<String, Object> map = new LinkedHashMap<>();
                List<String> keys = new ArrayList<>(kind == 0 ? List.of("ü键", "", "k") : List.of());
                for (int i = kind == 2 ? r.nextInt(4) : 0; i > 0; i--) {
                    keys.add("k" + r.nextInt(1000));
                }
                for (int i = 0; i < keys.size(); i++) {
                    map.put(keys.get(i), value(schema.getValueType(), r, kind, index + i));
                }
                return map;
            default:
                throw new IllegalArgumentException("no generator for " + schema);
        }
    }

    /** {@code maxTime=micros}: the latest extreme timestamps are in the last microsecond of 9999 (default
     * {@code millis}: its last millisecond), where those with micro- or nanoseconds can go. */
    static boolean lastMicrosecond() {
        return "micros".equals(ARGS.getOrDefault("maxTime", "millis"));
    }

    static Object logicalValue(Schema schema, LogicalType logical, Random r, int kind, int index) {
        String name = logical.getName();
        int pick = (index / 3) % 3;
        switch (name) {
            case "timestamp-millis":
            case "timestamp-micros":
                boolean millis = name.equals("timestamp-millis");
                Instant[] tx = {Instant.parse("0001-01-01T00:00:00Z"),
                    Instant.parse(millis || !lastMicrosecond() ? "9999-12-31T23:59:59.999Z" : "9999-12-31T23:59:59.999999Z"),
                    Instant.parse(millis ? "1969-12-31T23:59:59.999Z" : "1969-12-31T23:59:59.999999Z")};
                if (kind != 2) {
                    return kind == 0 ? tx[pick] : Instant.EPOCH;
                }
                long micros = (long) (r.nextDouble() * 4e15) - 1_000_000_000_000_000L;
                return millis ? Instant.ofEpochMilli(micros / 1000) : Instant.EPOCH.plusNanos(micros * 1000);
            case "timestamp-nanos":  // Avro 1.12
                Instant[] nx = {Instant.parse("1677-09-21T00:12:43.145224192Z"),
                    Instant.parse("2262-04-11T23:47:16.854775807Z"), Instant.parse("1969-12-31T23:59:59.999999999Z")};
                return kind == 0 ? nx[pick] : kind == 1 ? Instant.EPOCH : Instant.EPOCH.plusNanos(r.nextLong() / 4);
            case "local-timestamp-nanos":
                return LocalDateTime.ofInstant((Instant) logicalValue(schema, LogicalTypes.timestampNanos(), r, kind,
                    index), ZoneOffset.UTC);
            case "local-timestamp-millis":
            case "local-timestamp-micros":
                boolean lmillis = name.equals("local-timestamp-millis");
                LocalDateTime[] lx = {LocalDateTime.parse("0001-01-01T00:00:00"),
                    LocalDateTime.parse(lmillis || !lastMicrosecond() ? "9999-12-31T23:59:59.999" : "9999-12-31T23:59:59.999999"),
                    LocalDateTime.parse("1969-12-31T23:59:59.5")};
                if (kind != 2) {
                    return kind == 0 ? lx[pick] : LocalDateTime.parse("1970-01-01T00:00:00");
                }
                long lm = (long) (r.nextDouble() * 4e15) - 1_000_000_000_000_000L;
                LocalDateTime t = LocalDateTime.ofEpochSecond(Math.floorDiv(lm, 1_000_000L),
                    (int) Math.floorMod(lm, 1_000_000L) * 1000, ZoneOffset.UTC);
                return lmillis ? t.withNano(t.getNano() / 1_000_000 * 1_000_000) : t;
            case "date":
                LocalDate[] dx = {LocalDate.parse("0001-01-01"), LocalDate.parse("9999-12-31"),
                    LocalDate.parse("1969-12-31")};
                return kind == 0 ? dx[pick] : kind == 1 ? LocalDate.ofEpochDay(0)
                    : LocalDate.ofEpochDay(r.nextInt(200_000) - 100_000);
            case "time-millis":
            case "time-micros":
                long unit = name.equals("time-millis") ? 1_000_000L : 1_000L;
                long max = 86_400_000_000_000L / unit - 1;
                return LocalTime.ofNanoOfDay((kind == 0 ? max : kind == 1 ? 0 : (long) (r.nextDouble() * max)) * unit);
            case "decimal":
                LogicalTypes.Decimal d = (LogicalTypes.Decimal) logical;
                BigInteger limit = BigInteger.TEN.pow(d.getPrecision()).subtract(BigInteger.ONE);
                BigInteger unscaled = kind == 0 ? (index % 2 == 0 ? limit.negate() : limit)
                    : kind == 1 ? BigInteger.ZERO
                    : new BigInteger(limit.bitLength() + 8, r).mod(limit).subtract(limit.shiftRight(1));
                return new BigDecimal(unscaled, d.getScale());
            case "uuid":
                return kind == 0 ? new UUID(-1L, -1L) : kind == 1 ? new UUID(0L, 0L) : new UUID(r.nextLong(), r.nextLong());
            default:
                throw new IllegalArgumentException("no generator for the logical type " + name);
        }
    }

    // ---------------------------------------------------------------- Protobuf

    static void protobuf(DefaultMQProducer producer) throws Exception {
        FileDescriptorSet set = FileDescriptorSet.parseFrom(Files.readAllBytes(Paths.get(ARGS.get("desc"))));
        Map<String, FileDescriptorProto> protos = new LinkedHashMap<>();
        for (FileDescriptorProto p : set.getFileList()) {
            protos.put(p.getName(), p);
        }
        Map<String, FileDescriptor> built = new HashMap<>();
        Descriptor type = null;
        for (String name : protos.keySet()) {
            FileDescriptor file = build(name, protos, built);
            for (Descriptor d : file.getMessageTypes()) {
                if (d.getFullName().equals(ARGS.get("message"))) {
                    type = d;
                }
            }
        }
        if (type == null) {
            throw new IllegalArgumentException("no message " + ARGS.get("message") + " in " + ARGS.get("desc"));
        }
        int start = Integer.parseInt(ARGS.getOrDefault("start", "0"));
        int count = Integer.parseInt(ARGS.get("proto"));
        long seed = Long.parseLong(ARGS.getOrDefault("seed", "52"));
        for (int index = start; index < start + count; index++) {
            Random random = new Random(seed * 2_000_003L + index);
            DynamicMessage message = message(type, random, index % 3, index);
            byte[] body = message.toByteArray();
            Message m = new Message(ARGS.get("protoTopic"), "proto", "O-" + index, body);
            Map<String, Object> line = header("protobuf", type.getFullName(), index, body);
            send(producer, m, line);
            try {
                line.put("reference", ref(DynamicMessage.parseFrom(type, body)));
                line.put("referenceError", null);
            } catch (Exception e) {
                line.put("reference", null);
                line.put("referenceError", e.toString());
            }
            print(line);
        }
    }

    static FileDescriptor build(String name, Map<String, FileDescriptorProto> protos, Map<String, FileDescriptor> built)
            throws Exception {
        FileDescriptor done = built.get(name);
        if (done != null) {
            return done;
        }
        FileDescriptorProto proto = protos.get(name);
        if (proto == null) {
            throw new IllegalArgumentException("the descriptor set lacks " + name);
        }
        List<FileDescriptor> deps = new ArrayList<>();
        for (String dep : proto.getDependencyList()) {
            deps.add(build(dep, protos, built));
        }
        FileDescriptor file = FileDescriptor.buildFrom(proto, deps.toArray(new FileDescriptor[0]));
        built.put(name, file);
        return file;
    }

    /** A message of {@code type}: kind 0 extremes, 1 nothing set (defaults, nulls), 2 random. */
    static DynamicMessage message(Descriptor type, Random r, int kind, int index) {
        DynamicMessage.Builder b = DynamicMessage.newBuilder(type);
        for (FieldDescriptor f : type.getFields()) {
            if (f.getRealContainingOneof() != null) {
                continue;
            }
            if (f.isMapField()) {
                Descriptor entry = f.getMessageType();
                int n = kind == 0 ? 3 : kind == 1 ? 0 : r.nextInt(4);
                List<Object> seen = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    Object key = scalar(entry.findFieldByName("key"), r, kind == 0 ? 2 : kind, index + i);
                    if (seen.contains(key)) {
                        continue;
                    }
                    seen.add(key);
                    b.addRepeatedField(f, DynamicMessage.newBuilder(entry)
                        .setField(entry.findFieldByName("key"), key)
                        .setField(entry.findFieldByName("value"), single(entry.findFieldByName("value"), r, kind, index + i))
                        .build());
                }
            } else if (f.isRepeated()) {
                int n = kind == 0 ? 3 : kind == 1 ? 0 : r.nextInt(4);
                for (int i = 0; i < n; i++) {
                    b.addRepeatedField(f, single(f, r, kind, index + i));
                }
            } else if (kind == 1) {
                continue;  // absent: null with presence, else the default
            } else if (kind == 2 && f.hasPresence() && r.nextInt(4) == 0) {
                continue;
            } else {
                b.setField(f, single(f, r, kind, index));
            }
        }
        for (OneofDescriptor oneof : type.getRealOneofs()) {  // kind 1: the last member, set to its default
            int count = oneof.getFieldCount();
            FieldDescriptor f = oneof.getField(kind == 0 ? index % count : kind == 1 ? count - 1 : r.nextInt(count));
            b.setField(f, single(f, r, kind, index));
        }
        return b.build();
    }

    static Object single(FieldDescriptor f, Random r, int kind, int index) {
        if (f.getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
            return scalar(f, r, kind, index);
        }
        Descriptor type = f.getMessageType();
        if (type.getFullName().equals("google.protobuf.Timestamp")) {
            long[][] tx = {{-62135596800L, 0}, {253402300799L, lastMicrosecond() ? 999999999 : 999000000}, {-1L, 123456789}};
            long[] t = kind == 0 ? tx[(index / 3) % tx.length]
                : new long[] {(long) (r.nextDouble() * 4e9) - 1_000_000_000L, r.nextInt(1_000_000_000)};
            return DynamicMessage.newBuilder(type).setField(type.findFieldByName("seconds"), t[0])
                .setField(type.findFieldByName("nanos"), (int) t[1]).build();
        }
        if (type.getFullName().startsWith("google.protobuf.") && type.getFullName().endsWith("Value")) {
            FieldDescriptor v = type.findFieldByName("value");  // present, also with the default value
            return DynamicMessage.newBuilder(type).setField(v, scalar(v, r, kind, index)).build();
        }
        return message(type, r, kind, index);
    }

    static Object scalar(FieldDescriptor f, Random r, int kind, int index) {
        boolean hi = index % 2 == 1;
        switch (f.getType()) {
            case INT32: case SINT32: case SFIXED32:
                return kind == 0 ? (hi ? Integer.MAX_VALUE : Integer.MIN_VALUE) : kind == 1 ? 0 : r.nextInt();
            case UINT32: case FIXED32:
                return kind == 0 ? (hi ? -1 : Integer.MIN_VALUE) : kind == 1 ? 0 : r.nextInt();
            case INT64: case SINT64: case SFIXED64:
                return kind == 0 ? (hi ? Long.MAX_VALUE : Long.MIN_VALUE) : kind == 1 ? 0L : r.nextLong();
            case UINT64: case FIXED64:
                return kind == 0 ? (hi ? -1L : Long.MIN_VALUE) : kind == 1 ? 0L : r.nextLong();
            case FLOAT:
                float[] fx = {Float.NaN, Float.NEGATIVE_INFINITY, -0.0f, Float.MIN_VALUE, Float.MAX_VALUE};
                return kind == 0 ? fx[(index / 3) % fx.length] : kind == 1 ? 0.0f : (r.nextFloat() - 0.5f) * 1e4f;
            case DOUBLE:
                double[] dx = {Double.MIN_VALUE, Double.NaN, -Double.MAX_VALUE, Double.POSITIVE_INFINITY, -0.0};
                return kind == 0 ? dx[(index / 3) % dx.length] : kind == 1 ? 0.0 : r.nextGaussian() * 1e12;
            case BOOL:
                return kind == 0 || (kind == 2 && r.nextBoolean());
            case STRING:
                return kind == 0 ? (hi ? "ü日本語🎉 \u0000\"\\" : "y".repeat(500)) : kind == 1 ? "" : randomText(r);
            case BYTES:
                return ByteString.copyFrom(bytes(r, kind, 300));
            case ENUM:
                List<EnumValueDescriptor> values = f.getEnumType().getValues();
                if (kind == 0) {  // the last value, or a number the enum does not declare (proto3 enums are open)
                    return hi ? values.get(values.size() - 1) : f.getEnumType().findValueByNumberCreatingIfUnknown(7);
                }
                return kind == 1 ? values.get(0) : values.get(r.nextInt(values.size()));
            default:
                throw new IllegalArgumentException("no generator for " + f.getType());
        }
    }

    // ---------------------------------------------------------------- the reference values as JSON

    static Object ref(Object v) {
        if (v == null || v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof String) {
            return v;
        }
        if (v instanceof CharSequence || v instanceof GenericEnumSymbol || v instanceof UUID) {
            return v.toString();
        }
        if (v instanceof Float) {
            return (double) (Float) v;
        }
        if (v instanceof Double) {
            return v;
        }
        if (v instanceof ByteBuffer) {
            ByteBuffer bb = ((ByteBuffer) v).duplicate();
            byte[] b = new byte[bb.remaining()];
            bb.get(b);
            return tagged("$bytes", hex(b));
        }
        if (v instanceof GenericFixed) {
            return tagged("$bytes", hex(((GenericFixed) v).bytes()));
        }
        if (v instanceof Instant) {
            Instant t = (Instant) v;
            return t.getNano() % 1000 != 0 ? tagged("$instantNanos", t.getEpochSecond() * 1_000_000_000L + t.getNano())
                : tagged("$instant", Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000L), t.getNano() / 1000));
        }
        if (v instanceof LocalDateTime) {
            LocalDateTime t = (LocalDateTime) v;
            return t.getNano() % 1000 != 0
                ? tagged("$localNanos", t.toEpochSecond(ZoneOffset.UTC) * 1_000_000_000L + t.getNano())
                : tagged("$local", t.toEpochSecond(ZoneOffset.UTC) * 1_000_000L + t.getNano() / 1000);
        }
        if (v instanceof LocalDate) {
            return tagged("$date", ((LocalDate) v).toEpochDay());
        }
        if (v instanceof LocalTime) {
            return tagged("$time", ((LocalTime) v).toNanoOfDay());
        }
        if (v instanceof BigDecimal) {
            return tagged("$decimal", ((BigDecimal) v).toPlainString());
        }
        if (v instanceof GenericRecord) {
            GenericRecord rec = (GenericRecord) v;
            Map<String, Object> out = new LinkedHashMap<>();
            for (Schema.Field f : rec.getSchema().getFields()) {
                out.put(f.name(), ref(rec.get(f.pos())));
            }
            return out;
        }
        if (v instanceof Map) {
            List<Object> entries = new ArrayList<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                entries.add(Arrays.asList(ref(e.getKey()), ref(e.getValue())));
            }
            return tagged("$entries", entries);
        }
        if (v instanceof Collection) {
            List<Object> out = new ArrayList<>();
            for (Object item : (Collection<?>) v) {
                out.add(ref(item));
            }
            return out;
        }
        if (v instanceof DynamicMessage) {
            return refMessage((DynamicMessage) v);
        }
        throw new IllegalArgumentException("no reference form for " + v.getClass());
    }

    static Object refMessage(DynamicMessage m) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (FieldDescriptor f : m.getDescriptorForType().getFields()) {
            if (f.isMapField()) {
                List<Object> entries = new ArrayList<>();
                for (int i = 0; i < m.getRepeatedFieldCount(f); i++) {
                    DynamicMessage e = (DynamicMessage) m.getRepeatedField(f, i);
                    FieldDescriptor k = f.getMessageType().findFieldByName("key");
                    FieldDescriptor v = f.getMessageType().findFieldByName("value");
                    entries.add(Arrays.asList(refField(k, e.getField(k)), refField(v, e.getField(v))));
                }
                out.put(f.getName(), tagged("$entries", entries));
            } else if (f.isRepeated()) {
                List<Object> items = new ArrayList<>();
                for (int i = 0; i < m.getRepeatedFieldCount(f); i++) {
                    items.add(refField(f, m.getRepeatedField(f, i)));
                }
                out.put(f.getName(), items);
            } else if (f.hasPresence() && !m.hasField(f)) {
                out.put(f.getName(), null);
            } else {
                out.put(f.getName(), refField(f, m.getField(f)));
            }
        }
        return out;
    }

    static Object refField(FieldDescriptor f, Object v) {
        switch (f.getType()) {
            case UINT32: case FIXED32:
                return Integer.toUnsignedLong((Integer) v);
            case UINT64: case FIXED64:
                return new BigInteger(Long.toUnsignedString((Long) v));
            case BYTES:
                return tagged("$bytes", hex(((ByteString) v).toByteArray()));
            case ENUM:
                EnumValueDescriptor e = (EnumValueDescriptor) v;
                return f.getEnumType().findValueByNumber(e.getNumber()) == null ? String.valueOf(e.getNumber()) : e.getName();
            case MESSAGE: case GROUP:
                DynamicMessage m = (DynamicMessage) v;
                String name = m.getDescriptorForType().getFullName();
                if (name.equals("google.protobuf.Timestamp")) {
                    Map<String, Object> t = new LinkedHashMap<>();
                    t.put("$seconds", m.getField(m.getDescriptorForType().findFieldByName("seconds")));
                    t.put("$nanos", m.getField(m.getDescriptorForType().findFieldByName("nanos")));
                    return t;
                }
                if (name.startsWith("google.protobuf.") && name.endsWith("Value")) {
                    FieldDescriptor value = m.getDescriptorForType().findFieldByName("value");
                    return refField(value, m.getField(value));
                }
                return refMessage(m);
            default:
                return ref(v);
        }
    }

    static Map<String, Object> tagged(String tag, Object value) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(tag, value);
        return m;
    }

    // ---------------------------------------------------------------- sending and printing

    static Map<String, Object> header(String kind, String version, int index, byte[] body) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("kind", kind);
        line.put("version", version);
        line.put("index", index);
        line.put("bodyHex", hex(body));
        return line;
    }

    static void send(DefaultMQProducer producer, Message m, Map<String, Object> line) {
        try {
            SendResult r = producer.send(m);
            line.put("status", String.valueOf(r.getSendStatus()));
            line.put("msgId", r.getMsgId());
            line.put("offsetMsgId", r.getOffsetMsgId());
            line.put("queueId", r.getMessageQueue().getQueueId());
            line.put("queueOffset", r.getQueueOffset());
            if (!"SEND_OK".equals(line.get("status"))) {
                failed = true;
            }
        } catch (Exception e) {
            failed = true;
            line.put("status", "EXCEPTION");
            line.put("error", e.toString());
            e.printStackTrace();
        }
    }

    static byte[] toArray(ByteBuffer buffer) {
        byte[] b = new byte[buffer.remaining()];
        buffer.get(b);
        return b;
    }

    static byte[] bytes(Random r, int kind, int extremeLength) {
        if (kind == 1) {
            return new byte[0];
        }
        byte[] b = new byte[kind == 0 ? extremeLength : r.nextInt(17)];
        if (kind == 0) {
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) i;
            }
        } else {
            r.nextBytes(b);
        }
        return b;
    }

    static byte[] fixedBytes(Random r, int kind, int size) {
        byte[] b = new byte[size];
        if (kind == 0) {
            java.util.Arrays.fill(b, (byte) 0xff);
        } else if (kind == 2) {
            r.nextBytes(b);
        }
        return b;
    }

    static String randomText(Random r) {
        String alphabet = "abcXYZ019 -_äß日本🎉";
        StringBuilder sb = new StringBuilder();
        int n = r.nextInt(25);
        for (int i = 0; i < n; i++) {
            sb.appendCodePoint(alphabet.codePoints().toArray()[r.nextInt((int) alphabet.codePoints().count())]);
        }
        return sb.toString();
    }

    static String hex(byte[] data) {
        StringBuilder sb = new StringBuilder();
        for (byte b : data) {
            sb.append(String.format("%02x", b & 0xff));
        }
        return sb.toString();
    }

    static synchronized void print(Map<String, Object> line) {
        OUT.print(Json.write(line));
        OUT.print('\n');
        OUT.flush();
    }
}
