"""connector/protocol/fastjson.py and the hash orders of connector/protocol/java_hash_map.py against golden text.

The expected values were printed by real fastjson 1.2.69 and JDK 17 collections (the staged RocketMQ 4.9 jars);
tests/interop/test_fastjson_bodies.py checks every body type against the running jar. Rules: docs/protocol.md §4.7.
"""

from __future__ import annotations

from connector.protocol.fastjson import Bean, JavaMap, JavaSet, dumps, format_double, quote
from connector.protocol.java_hash_map import (
    JavaConcurrentHashMap,
    JavaHashMapTable,
    hash_map_copy_capacity,
    hash_map_order,
    java_int_hash,
    java_long_hash,
    java_string_hash,
    message_queue_hash,
)

#: JSON.toJSONString of the characters U+0000..U+00A0, then é, U+2028, U+2029, 😀, U+FEFF, U+FFFF
ESCAPED = (
    '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000B\\f\\r\\u000'
    'E\\u000F\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u0'
    '01A\\u001B\\u001C\\u001D\\u001E\\u001F !\\"#$%&\'()*+,-./0123456789:;<=>?@ABC'
    'DEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\\u007F\\u00'
    '80\\u0081\\u0082\\u0083\\u0084\\u0085\\u0086\\u0087\\u0088\\u0089\\u008A\\u008B\\u'
    '008C\\u008D\\u008E\\u008F\\u0090\\u0091\\u0092\\u0093\\u0094\\u0095\\u0096\\u0097'
    '\\u0098\\u0099\\u009A\\u009B\\u009C\\u009D\\u009E\\u009F\xa0é\\u2028\\u2029😀\ufeff\uffff"'
)
#: a LinkedHashMap {1:"a", -2L:"b", "s":null, "t":[1,null,"x"], "e":[], "f":{}}, compact and pretty
COMPACT = '{1:"a",-2:"b","t":[1,null,"x"],"e":[],"f":{}}'
PRETTY = '{1:"a",-2:"b",\n\t"t":[\n\t\t1,\n\t\tnull,\n\t\t"x"\n\t],\n\t"e":[],\n\t"f":{}\n}'
DOUBLES = ['0.0', '-0.0', '1.0', '100.0', '0.001', '9.99E-4', '9999999.0', '1.0E7', '1.25E-5', '123.456', '1.0E22',
           '4.9E-324', '1.7976931348623157E308', '0.1', '0.3333333333333333']
#: new ConcurrentHashMap<>() after put("k" + (i * 7 % 40)) for i in 0..39 (two resizes)
CHM_ORDER = ['k31', 'k30', 'k11', 'k33', 'k32', 'k10', 'k35', 'k13', 'k34', 'k12', 'k37', 'k15', 'k14', 'k36', 'k39',
             'k17', 'k16', 'k38', 'k19', 'k18', 'k0', 'k1', 'k2', 'k20', 'k3', 'k4', 'k22', 'k5', 'k21', 'k6', 'k7',
             'k24', 'k23', 'k8', 'k9', 'k26', 'k25', 'k28', 'k27', 'k29']
#: new HashMap<>(4) after computeIfAbsent("c" + i) for i in 0..19
COMPUTE_IF_ABSENT_ORDER = ['c11', 'c10', 'c13', 'c12', 'c15', 'c14', 'c17', 'c16', 'c19', 'c18',
                           'c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9']


def test_strings_are_escaped_as_fastjson_does():
    text = "".join(map(chr, range(0xA1))) + "\u00e9\u2028\u2029\U0001F600\ufeff\uffff"
    assert quote(text) == ESCAPED


def test_maps_lists_and_nulls_compact_and_pretty():
    value = {1: "a", -2: "b", "s": None, "t": [1, None, "x"], "e": [], "f": {}}
    assert dumps(value) == COMPACT
    assert dumps(value, pretty=True) == PRETTY


def test_beans_sort_properties_and_skip_nulls():
    bean = Bean(topic="t", brokerName="b", queueId=0, extra=None)
    assert dumps(bean) == '{"brokerName":"b","queueId":0,"topic":"t"}'
    assert dumps(JavaMap([(bean, Bean(x=1))])) == '{{"brokerName":"b","queueId":0,"topic":"t"}:{"x":1}}'
    assert dumps(Bean(s=JavaSet(["a", "b"])), pretty=True) == '{\n\t"s":["a","b"]\n}'
    assert dumps(Bean()) == "{}"


def test_doubles_are_written_as_ryu_double():
    values = [0.0, -0.0, 1.0, 100.0, 0.001, 9.99e-4, 9999999.0, 1.0e7, 1.25e-5, 123.456, 1e22, 5e-324,
              1.7976931348623157e308, 0.1, 1.0 / 3]
    assert [format_double(v) for v in values] == DOUBLES
    assert format_double(float("nan")) == format_double(float("inf")) == "null"


def test_java_hash_codes():
    assert java_string_hash("hello") == 99162322
    assert java_long_hash(-1) == 0 and java_long_hash(1 << 32) == 1 and java_int_hash(-1) == -1
    assert message_queue_hash("t", "b", 0) == java_int_hash(31 * (31 * (31 + 98) + 0) + 116)


def test_concurrent_hash_map_order_reverses_on_resize():
    keys = [f"k{i * 7 % 40}" for i in range(40)]
    assert JavaConcurrentHashMap.order(keys, java_string_hash) == CHM_ORDER
    assert JavaConcurrentHashMap.order(list(range(100)), java_int_hash, 32) == list(range(100))


def test_hash_map_orders():
    table = JavaHashMapTable(java_string_hash, 4)
    for i in range(20):
        table.compute_if_absent(f"c{i}")
    assert table.keys() == COMPUTE_IF_ABSENT_ORDER
    assert hash_map_copy_capacity(2) == 4 and hash_map_copy_capacity(3) == 8 and hash_map_copy_capacity(0) == 16
    assert hash_map_order([1, 4], java_long_hash, hash_map_copy_capacity(2)) == [4, 1]  # a cloned brokerAddrs
