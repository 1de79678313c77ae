/*
 * encode_records: bronze rows back to CommitLog records, a batch at a time (connector/restore/encode.py,
 * docs/restore.md "Exactness"). Part of the native kernel connector.decode._decode_kernel; the layout constants
 * are those of connector/decode/_decode_kernel.h (RocketMQ 4.9.8 CommitLog record, docs/protocol.md §1.2; the V2
 * record's 2-byte TOPIC length, docs/protocol.md §8). The Python encoder (connector.restore.encode.encode_rows) is the
 * reference: same bytes, and it is the one that names what is wrong with a row this function refuses.
 */
#include "_decode_kernel.h"

/* The rows of `fixed`, in this order (connector/restore/encode.py ENCODE_FIXED_ROWS). */
enum { F_STORE_SIZE, F_BODY_CRC, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_COMMIT_LOG_OFFSET, F_SYS_FLAG, F_BORN_TS,
       F_BORN_PORT, F_BORN_IP_LEN, F_STORE_TS, F_STORE_PORT, F_STORE_IP_LEN, F_RECONSUME, F_PREPARED, F_FORMAT,
       F_ROWS };

#define RECORD_FORMAT_V2 1
#define RECORD_FORMAT_TRAILING_SEPARATOR 2
#define TOPIC_MAX_LENGTH_BYTES 127
#define PROPERTIES_MAX_LENGTH_BYTES 32767
#define NAME_VALUE_SEPARATOR 1
#define PROPERTY_SEPARATOR 2
#define IP_SLOT 16

static inline void store_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void store_be64(unsigned char *p, uint64_t v)
{
    store_be32(p, (uint32_t)(v >> 32));
    store_be32(p + 4, (uint32_t)v);
}

/* One Arrow binary/string column: int64 offsets (n + 1, absolute into data) and its data. */
struct column {
    const int64_t *off;
    const unsigned char *data;
};

const char encode_records_doc[] =
"encode_records(out, fixed, ips, topic_off, topic, body_off, body, stored_body_off, stored_body, stored_valid,\n"
"               stored_props_off, stored_props, props_valid, map_off, keys_off, keys, values_off, values)\n"
"    -> (count, bad)\n\n"
"Write the CommitLog records of n rows one after the other into the writable buffer out.\n\n"
"fixed: int64 (16, n), rows STORE_SIZE BODY_CRC QUEUE_ID FLAG QUEUE_OFFSET COMMIT_LOG_OFFSET SYS_FLAG\n"
"BORN_TS(ms) BORN_PORT BORN_IP_LEN STORE_TS(ms) STORE_PORT STORE_IP_LEN RECONSUME PREPARED FORMAT; ips: uint8\n"
"(2, n, 16), the born then store host's address bytes; topic, body, stored_body, stored_props, keys, values:\n"
"Arrow binary columns' data, each after its int64 offsets (absolute into the data, n + 1 of them; for the keys\n"
"and values one per map entry plus one); stored_valid, props_valid: uint8 (n), 1 where storedBody / storedProperties is set;\n"
"map_off: int64 (n + 1), each row's properties map entries. The body is storedBody where set, else body; the\n"
"PROPERTIES storedProperties where set, else the map's pairs name\\x01value joined by \\x02 (a trailing \\x02\n"
"under FORMAT bit 2); MAGICCODE V2 and a 2-byte TOPIC length under FORMAT bit 1; the SYSFLAG V6 bits follow\n"
"the address lengths. Offsets and lengths in bytes. Record layout: RocketMQ 4.9.8\n"
"CommitLog.DefaultAppendMessageCallback, docs/protocol.md §1.2.\n\n"
"Returns (count, bad): count rows written (their records fill out[0:sum of STORE_SIZE]); bad is 0 when all n\n"
"were, else 1: row count is one whose record would not be STORE_SIZE bytes, whose topic or properties are too\n"
"long, or that does not fit in out (nothing of it written). Raises ValueError for buffers of the wrong sizes.";

/* The PROPERTIES length of a row re-encoded from its map entries [lo, hi). */
static int64_t map_length(int64_t lo, int64_t hi, const struct column *keys, const struct column *values,
                          int trailing)
{
    int64_t len = 0;
    for (int64_t e = lo; e < hi; e++)
        len += (keys->off[e + 1] - keys->off[e]) + 1 + (values->off[e + 1] - values->off[e]);
    if (hi > lo)
        len += hi - lo - 1;
    return len + (trailing ? 1 : 0);
}

static unsigned char *put(unsigned char *p, const unsigned char *from, int64_t len)
{
    memcpy(p, from, (size_t)len);
    return p + len;
}

static unsigned char *put_host(unsigned char *p, const unsigned char *ip, int64_t ip_len, int64_t port)
{
    p = put(p, ip, ip_len);
    store_be32(p, (uint32_t)port);
    return p + 4;
}

enum { B_OUT, B_FIXED, B_IPS, B_TOPIC_OFF, B_TOPIC, B_BODY_OFF, B_BODY, B_SBODY_OFF, B_SBODY, B_SBODY_VALID,
       B_SPROPS_OFF, B_SPROPS, B_SPROPS_VALID, B_MAP_OFF, B_KEY_OFF, B_KEY, B_VAL_OFF, B_VAL, B_COUNT };

PyObject *encode_records(PyObject *self, PyObject *args)
{
    Py_buffer b[B_COUNT];
    (void)self;
    memset(b, 0, sizeof(b));
    if (!PyArg_ParseTuple(args, "w*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*", &b[B_OUT], &b[B_FIXED],
                          &b[B_IPS], &b[B_TOPIC_OFF], &b[B_TOPIC], &b[B_BODY_OFF], &b[B_BODY], &b[B_SBODY_OFF],
                          &b[B_SBODY], &b[B_SBODY_VALID], &b[B_SPROPS_OFF], &b[B_SPROPS], &b[B_SPROPS_VALID],
                          &b[B_MAP_OFF], &b[B_KEY_OFF], &b[B_KEY], &b[B_VAL_OFF], &b[B_VAL]))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = b[B_FIXED].len / (Py_ssize_t)(8 * F_ROWS);
    if (b[B_FIXED].len != n * 8 * F_ROWS || b[B_IPS].len != n * 2 * IP_SLOT || b[B_SBODY_VALID].len != n
        || b[B_SPROPS_VALID].len != n) {
        PyErr_SetString(PyExc_ValueError, "encode_records: fixed, ips and the validity buffers disagree on n");
        goto done;
    }
    const int offset_buffers[] = {B_TOPIC_OFF, B_BODY_OFF, B_SBODY_OFF, B_SPROPS_OFF, B_MAP_OFF};
    for (size_t i = 0; i < sizeof(offset_buffers) / sizeof(offset_buffers[0]); i++) {
        if (b[offset_buffers[i]].len != (n + 1) * 8) {
            PyErr_SetString(PyExc_ValueError, "encode_records: an offsets buffer does not hold n + 1 int64 values");
            goto done;
        }
    }
    if (require_items(&b[B_KEY_OFF], 8, "keys") < 0 || b[B_KEY_OFF].len != b[B_VAL_OFF].len) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_records: keys and values differ in length");
        goto done;
    }
    const int64_t *fx = b[B_FIXED].buf;
    const unsigned char *ips = b[B_IPS].buf, *sbody_valid = b[B_SBODY_VALID].buf;
    const unsigned char *sprops_valid = b[B_SPROPS_VALID].buf;
    const int64_t *map_off = b[B_MAP_OFF].buf;
    struct column topic = {b[B_TOPIC_OFF].buf, b[B_TOPIC].buf}, body = {b[B_BODY_OFF].buf, b[B_BODY].buf};
    struct column sbody = {b[B_SBODY_OFF].buf, b[B_SBODY].buf}, sprops = {b[B_SPROPS_OFF].buf, b[B_SPROPS].buf};
    struct column keys = {b[B_KEY_OFF].buf, b[B_KEY].buf}, values = {b[B_VAL_OFF].buf, b[B_VAL].buf};
    unsigned char *out = b[B_OUT].buf;
    Py_ssize_t room = b[B_OUT].len, used = 0, i = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n; i++) {
#define FX(row) fx[(Py_ssize_t)(row) * n + i]
        int64_t fmt = FX(F_FORMAT), born_ip = FX(F_BORN_IP_LEN), store_ip = FX(F_STORE_IP_LEN);
        int v2 = (fmt & RECORD_FORMAT_V2) != 0;
        uint32_t sys_flag = (uint32_t)FX(F_SYS_FLAG);
        sys_flag = born_ip == 16 ? sys_flag | BORNHOST_V6_FLAG : sys_flag & ~(uint32_t)BORNHOST_V6_FLAG;
        sys_flag = store_ip == 16 ? sys_flag | STOREHOSTADDRESS_V6_FLAG : sys_flag & ~(uint32_t)STOREHOSTADDRESS_V6_FLAG;
        const struct column *bc = sbody_valid[i] ? &sbody : &body;
        int64_t body_len = bc->off[i + 1] - bc->off[i];
        int64_t topic_len = topic.off[i + 1] - topic.off[i];
        int64_t props_len = sprops_valid[i] ? sprops.off[i + 1] - sprops.off[i]
            : map_length(map_off[i], map_off[i + 1], &keys, &values, (fmt & RECORD_FORMAT_TRAILING_SEPARATOR) != 0);
        int64_t total = BODY_POSITION - 2 * HOST_V4_BYTES + (born_ip + 4) + (store_ip + 4) + 4 + body_len
            + (v2 ? 2 : 1) + topic_len + 2 + props_len;
        if (topic_len > (v2 ? PROPERTIES_MAX_LENGTH_BYTES : TOPIC_MAX_LENGTH_BYTES)
            || props_len > PROPERTIES_MAX_LENGTH_BYTES || total != FX(F_STORE_SIZE) || total > room - used
            || (born_ip != 4 && born_ip != 16) || (store_ip != 4 && store_ip != 16)) {
            bad = 1;
            break;
        }
        unsigned char *p = out + used;
        store_be32(p + TOTALSIZE_POSITION, (uint32_t)total);
        store_be32(p + MAGICCODE_POSITION, v2 ? MESSAGE_MAGIC_CODE_V2 : MESSAGE_MAGIC_CODE);
        store_be32(p + BODYCRC_POSITION, (uint32_t)FX(F_BODY_CRC));
        store_be32(p + QUEUEID_POSITION, (uint32_t)FX(F_QUEUE_ID));
        store_be32(p + FLAG_POSITION, (uint32_t)FX(F_FLAG));
        store_be64(p + QUEUEOFFSET_POSITION, (uint64_t)FX(F_QUEUE_OFFSET));
        store_be64(p + PHYSICALOFFSET_POSITION, (uint64_t)FX(F_COMMIT_LOG_OFFSET));
        store_be32(p + SYSFLAG_POSITION, sys_flag);
        store_be64(p + BORNTIMESTAMP_POSITION, (uint64_t)FX(F_BORN_TS));
        unsigned char *q = put_host(p + BORNHOST_POSITION, ips + i * IP_SLOT, born_ip, FX(F_BORN_PORT));
        store_be64(q, (uint64_t)FX(F_STORE_TS));
        q = put_host(q + 8, ips + (n + i) * IP_SLOT, store_ip, FX(F_STORE_PORT));
        store_be32(q, (uint32_t)FX(F_RECONSUME));
        store_be64(q + 4, (uint64_t)FX(F_PREPARED));
        store_be32(q + 12, (uint32_t)body_len);
        q = put(q + 16, bc->data + bc->off[i], body_len);
        if (v2) {
            *q++ = (unsigned char)(topic_len >> 8);
        }
        *q++ = (unsigned char)topic_len;
        q = put(q, topic.data + topic.off[i], topic_len);
        *q++ = (unsigned char)(props_len >> 8);
        *q++ = (unsigned char)props_len;
        if (sprops_valid[i]) {
            q = put(q, sprops.data + sprops.off[i], props_len);
        } else {
            for (int64_t e = map_off[i]; e < map_off[i + 1]; e++) {
                if (e > map_off[i])
                    *q++ = PROPERTY_SEPARATOR;
                q = put(q, keys.data + keys.off[e], keys.off[e + 1] - keys.off[e]);
                *q++ = NAME_VALUE_SEPARATOR;
                q = put(q, values.data + values.off[e], values.off[e + 1] - values.off[e]);
            }
            if (fmt & RECORD_FORMAT_TRAILING_SEPARATOR)
                *q++ = PROPERTY_SEPARATOR;
        }
        used += total;
#undef FX
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("ni", i, bad);
done:
    for (int k = 0; k < B_COUNT; k++)
        if (b[k].obj != NULL)
            PyBuffer_Release(&b[k]);
    return result;
}
