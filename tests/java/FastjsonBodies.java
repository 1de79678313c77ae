import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.broker.offset.ConsumerOffsetManager;
import org.apache.rocketmq.broker.subscription.SubscriptionGroupManager;
import org.apache.rocketmq.broker.topic.TopicConfigManager;
import org.apache.rocketmq.common.DataVersion;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.TopicFilterType;
import org.apache.rocketmq.common.admin.ConsumeStats;
import org.apache.rocketmq.common.admin.OffsetWrapper;
import org.apache.rocketmq.common.admin.TopicOffset;
import org.apache.rocketmq.common.admin.TopicStatsTable;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.ConsumeQueueData;
import org.apache.rocketmq.common.protocol.body.Connection;
import org.apache.rocketmq.common.protocol.body.ConsumerConnection;
import org.apache.rocketmq.common.protocol.body.GroupList;
import org.apache.rocketmq.common.protocol.body.KVTable;
import org.apache.rocketmq.common.protocol.body.QueryConsumeQueueResponseBody;
import org.apache.rocketmq.common.protocol.body.RegisterBrokerBody;
import org.apache.rocketmq.common.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.common.protocol.header.GetConsumerListByGroupResponseBody;
import org.apache.rocketmq.common.protocol.heartbeat.ConsumeType;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.common.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.namesrv.routeinfo.RouteInfoManager;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.store.schedule.DelayOffsetSerializeWrapper;

/**
 * Builds RocketMQ 4.9.8's body objects with the real classes (and, for the name server, the real
 * {@code RouteInfoManager}) from independent case descriptions and prints the text real fastjson writes for them.
 *
 * Usage: {@code FastjsonBodies <cases.jsonl>}; each input line is one case {@code {"id", "kind", ...}} (see
 * tests/interop/test_fastjson_bodies.py for the fields of each kind). Each output line is
 * {@code {"id": n, "texts": {name: text or null}}}: {@code compact} is {@code RemotingSerializable.toJson(obj,
 * false)} (what {@code encode()} sends), {@code pretty} is {@code toJson(obj, true)} (what {@code
 * ConfigManager.persist} writes). Maps are filled the way the broker fills them, in the order the case lists.
 */
public final class FastjsonBodies {
    private FastjsonBodies() {
    }

    public static void main(String[] args) throws Exception {
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            if (line.trim().isEmpty()) {
                continue;
            }
            JSONObject c = JSON.parseObject(line);
            Map<String, Object> texts = new LinkedHashMap<>();
            run(c, texts);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("id", c.getInteger("id"));
            out.put("texts", texts);
            System.out.println(Json.write(out));
        }
    }

    private static void both(Map<String, Object> texts, Object obj) {
        texts.put("compact", RemotingSerializable.toJson(obj, false));
        texts.put("pretty", RemotingSerializable.toJson(obj, true));
    }

    private static void dataVersion(DataVersion dv, JSONArray counterAndTimestamp) {
        dv.setCounter(new AtomicLong(counterAndTimestamp.getLongValue(0)));
        dv.setTimestamp(counterAndTimestamp.getLongValue(1));
    }

    private static TopicConfig topicConfig(JSONObject t) {
        TopicConfig tc = new TopicConfig(t.getString("topicName"), t.getIntValue("readQueueNums"),
            t.getIntValue("writeQueueNums"), t.getIntValue("perm"));
        tc.setTopicSysFlag(t.getIntValue("topicSysFlag"));
        tc.setOrder(t.getBooleanValue("order"));
        tc.setTopicFilterType(TopicFilterType.valueOf(t.getString("topicFilterType")));
        return tc;
    }

    private static TopicConfigManager topicConfigManager(JSONObject c) {
        TopicConfigManager tcm = new TopicConfigManager();
        for (Object t : c.getJSONArray("topics")) {
            TopicConfig tc = topicConfig((JSONObject) t);
            tcm.getTopicConfigTable().put(tc.getTopicName(), tc);
        }
        dataVersion(tcm.getDataVersion(), c.getJSONArray("dataVersion"));
        return tcm;
    }

    private static MessageQueue mq(JSONArray q) {
        return new MessageQueue(q.getString(0), q.getString(1), q.getIntValue(2));
    }

    private static void run(JSONObject c, Map<String, Object> texts) throws java.io.IOException {
        String kind = c.getString("kind");
        switch (kind) {
            case "namesrv": namesrv(c, texts); break;
            case "topics": {
                TopicConfigManager tcm = topicConfigManager(c);
                texts.put("compact", tcm.encode(false));
                texts.put("pretty", tcm.encode(true));
                RegisterBrokerBody body = new RegisterBrokerBody();
                body.setTopicConfigSerializeWrapper(tcm.buildTopicConfigSerializeWrapper());
                texts.put("register", new String(body.encode(false), StandardCharsets.UTF_8));
                break;
            }
            case "offsets": {
                ConsumerOffsetManager com = new ConsumerOffsetManager();
                for (Object o : c.getJSONArray("commits")) {
                    JSONArray a = (JSONArray) o;
                    com.commitOffset("127.0.0.1", a.getString(0), a.getString(1), a.getIntValue(2), a.getLongValue(3));
                }
                texts.put("compact", com.encode(false));
                texts.put("pretty", com.encode(true));
                break;
            }
            case "groups": {
                SubscriptionGroupManager sgm = new SubscriptionGroupManager();
                for (Object o : c.getJSONArray("groups")) {
                    SubscriptionGroupConfig g = JSON.parseObject(((JSONObject) o).toJSONString(),
                        SubscriptionGroupConfig.class);
                    sgm.getSubscriptionGroupTable().put(g.getGroupName(), g);
                }
                dataVersion(sgm.getDataVersion(), c.getJSONArray("dataVersion"));
                texts.put("compact", sgm.encode(false));
                texts.put("pretty", sgm.encode(true));
                break;
            }
            case "delay": {
                DelayOffsetSerializeWrapper w = new DelayOffsetSerializeWrapper();
                ConcurrentMap<Integer, Long> table = new ConcurrentHashMap<>(32);  // ScheduleMessageService.offsetTable
                for (Object o : c.getJSONArray("offsets")) {
                    table.put(((JSONArray) o).getIntValue(0), ((JSONArray) o).getLongValue(1));
                }
                w.setOffsetTable(table);
                both(texts, w);
                break;
            }
            case "kvtable": {
                HashMap<String, String> table = new HashMap<>(c.getIntValue("initialCapacity"));
                for (Object o : c.getJSONArray("entries")) {
                    table.put(((JSONArray) o).getString(0), ((JSONArray) o).getString(1));
                }
                KVTable kv = new KVTable();
                kv.setTable(table);
                both(texts, kv);
                break;
            }
            case "topicStats": {
                TopicStatsTable t = new TopicStatsTable();
                for (Object o : c.getJSONArray("queues")) {
                    JSONArray a = (JSONArray) o;
                    TopicOffset off = new TopicOffset();
                    off.setMinOffset(a.getLongValue(3));
                    off.setMaxOffset(a.getLongValue(4));
                    off.setLastUpdateTimestamp(a.getLongValue(5));
                    t.getOffsetTable().put(mq(a), off);
                }
                both(texts, t);
                break;
            }
            case "consumeStats": {
                ConsumeStats s = new ConsumeStats();
                for (Object o : c.getJSONArray("queues")) {
                    JSONArray a = (JSONArray) o;
                    OffsetWrapper w = new OffsetWrapper();
                    w.setBrokerOffset(a.getLongValue(3));
                    w.setConsumerOffset(a.getLongValue(4));
                    w.setLastTimestamp(a.getLongValue(5));
                    s.getOffsetTable().put(mq(a), w);
                }
                s.setConsumeTps(c.getDoubleValue("consumeTps"));
                both(texts, s);
                break;
            }
            case "consumerConnection": consumerConnection(c, texts); break;
            case "groupList": {
                GroupList g = new GroupList();
                for (Object o : c.getJSONArray("groups")) {
                    g.getGroupList().add((String) o);
                }
                both(texts, g);
                break;
            }
            case "consumerIdList": {
                GetConsumerListByGroupResponseBody b = new GetConsumerListByGroupResponseBody();
                b.setConsumerIdList(new ArrayList<>(c.getJSONArray("ids").toJavaList(String.class)));
                both(texts, b);
                break;
            }
            case "consumeQueue": {
                QueryConsumeQueueResponseBody b = new QueryConsumeQueueResponseBody();
                b.setMaxQueueIndex(c.getLongValue("maxQueueIndex"));
                b.setMinQueueIndex(c.getLongValue("minQueueIndex"));
                List<ConsumeQueueData> entries = new ArrayList<>();
                for (Object o : c.getJSONArray("entries")) {
                    JSONArray a = (JSONArray) o;
                    ConsumeQueueData d = new ConsumeQueueData();
                    d.setPhysicOffset(a.getLongValue(0));
                    d.setPhysicSize(a.getIntValue(1));
                    d.setTagsCode(a.getLongValue(2));
                    entries.add(d);
                }
                b.setQueueData(entries);
                both(texts, b);
                break;
            }
            case "dataVersion": {
                DataVersion dv = new DataVersion();
                dataVersion(dv, c.getJSONArray("dataVersion"));
                texts.put("compact", dv.toJson());
                break;
            }
            default:
                throw new IllegalArgumentException("unknown case kind " + kind);
        }
    }

    /** AdminBrokerProcessor.getConsumerConnectionList over a ConsumerGroupInfo's subscription table. */
    private static void consumerConnection(JSONObject c, Map<String, Object> texts) {
        ConsumerConnection cc = new ConsumerConnection();
        cc.setConsumeType(ConsumeType.valueOf(c.getString("consumeType")));
        cc.setMessageModel(MessageModel.valueOf(c.getString("messageModel")));
        cc.setConsumeFromWhere(ConsumeFromWhere.valueOf(c.getString("consumeFromWhere")));
        ConcurrentMap<String, SubscriptionData> groupTable = new ConcurrentHashMap<>();  // ConsumerGroupInfo
        for (Object o : c.getJSONArray("subscriptions")) {
            JSONObject s = (JSONObject) o;
            SubscriptionData sd = new SubscriptionData();
            sd.setTopic(s.getString("topic"));
            sd.setSubString(s.getString("subString"));
            sd.setSubVersion(s.getLongValue("subVersion"));
            sd.setExpressionType(s.getString("expressionType"));
            sd.setClassFilterMode(s.getBooleanValue("classFilterMode"));
            for (Object tag : s.getJSONArray("tagsSet")) {
                sd.getTagsSet().add((String) tag);
            }
            for (Object code : s.getJSONArray("codeSet")) {
                sd.getCodeSet().add(((Number) code).intValue());
            }
            groupTable.put(sd.getTopic(), sd);
        }
        cc.getSubscriptionTable().putAll(groupTable);
        for (Object o : c.getJSONArray("connections")) {
            JSONArray a = (JSONArray) o;
            Connection conn = new Connection();
            conn.setClientId(a.getString(0));
            conn.setClientAddr(a.getString(1));
            conn.setLanguage(LanguageCode.valueOf(a.getString(2)));
            conn.setVersion(a.getIntValue(3));
            cc.getConnectionSet().add(conn);
        }
        both(texts, cc);
    }

    /** The real name server's RouteInfoManager fed the same REGISTER_BROKER bodies (through fastjson, as the
     * name server decodes them), then asked for each topic's route, the cluster info and the topic list. */
    private static void namesrv(JSONObject c, Map<String, Object> texts) throws java.io.IOException {
        RouteInfoManager rim = new RouteInfoManager();
        for (Object o : c.getJSONArray("registrations")) {
            JSONObject r = (JSONObject) o;
            TopicConfigManager tcm = topicConfigManager(r);
            RegisterBrokerBody body = new RegisterBrokerBody();
            body.setTopicConfigSerializeWrapper(tcm.buildTopicConfigSerializeWrapper());
            RegisterBrokerBody decoded = RegisterBrokerBody.decode(body.encode(false), false);
            rim.registerBroker(r.getString("cluster"), r.getString("addr"), r.getString("name"), r.getLongValue("id"),
                r.getString("addr"), decoded.getTopicConfigSerializeWrapper(), decoded.getFilterServerList(), null);
        }
        for (Object o : c.getJSONArray("unregistrations")) {
            JSONObject r = (JSONObject) o;
            rim.unregisterBroker(r.getString("cluster"), r.getString("addr"), r.getString("name"), r.getLongValue("id"));
        }
        JSONArray routes = c.getJSONArray("routes");
        for (int i = 0; i < routes.size(); i++) {
            TopicRouteData route = rim.pickupTopicRouteData(routes.getString(i));
            texts.put("route:" + i, route == null ? null : RemotingSerializable.toJson(route, false));
        }
        texts.put("cluster", RemotingSerializable.toJson(rim.getAllClusterInfo(), false));
        texts.put("topicList", RemotingSerializable.toJson(rim.getAllTopicList(), false));
    }
}
