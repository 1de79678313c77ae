/*
 * The native kernel's locate loop (connector/decode/native_kernels.py, NativeKernels.locate): every fixed field of
 * a batch's records and where its variable-length fields lie, in one pass with the GIL released. The NumPy
 * reference with the same results and the same checks is connector/decode/locate.py. Record layout: RocketMQ
 * 4.9.8 CommitLog, docs/protocol.md §1.2 (V2 records' 2-byte TOPIC prefix: docs/protocol.md §8).
 */
#include "_decode_kernel.h"

/* The rows of locate_records' output, in order; LOCATED_ROWS names them after connector.decode.locate.Located's
 * attributes. A host is packed as its 8 stored bytes read big-endian (IPv4 << 32 | port), 0 for an IPv6 host. */
enum located_row { ROW_TOTAL, ROW_CRC, ROW_QUEUE_ID, ROW_FLAG, ROW_QUEUE_OFFSET, ROW_SYS_FLAG, ROW_BORN_TS,
                   ROW_STORE_TS, ROW_RECON, ROW_PREPARED, ROW_BORN_HOST_POS, ROW_STORE_HOST_POS, ROW_BORN_PACKED,
                   ROW_STORE_PACKED, ROW_BODY_POS, ROW_BODY_LEN, ROW_TOPIC_POS, ROW_TOPIC_LEN, ROW_PROPS_POS,
                   ROW_PROPS_LEN, LOCATED_ROW_COUNT };
static const char *const located_row_names[LOCATED_ROW_COUNT] = {
    "total", "crc", "queue_id", "flag", "queue_offset", "sys_flag", "born_ts", "store_ts", "recon", "prepared",
    "born_host_pos", "store_host_pos", "born_packed", "store_packed", "body_pos", "body_len", "topic_pos",
    "topic_len", "props_pos", "props_len",
};

/* The checks, in the order the NumPy reference applies them; a record's first failing check is the one counted. */
enum located_check { CHECK_TOTALSIZE, CHECK_PHYSICALOFFSET, CHECK_BODY, CHECK_TOPIC, CHECK_PROPERTIES, CHECK_COUNT };
static const char *const check_fields[CHECK_COUNT] = {"TOTALSIZE", "PHYSICALOFFSET", "BODY", "TOPIC", "PROPERTIES"};

const char locate_records_doc[] =
"locate_records(data, starts, base_offset, out) -> (field, index)\n\n"
"Every fixed field of the records at starts, and where their BODY, TOPIC and PROPERTIES lie.\n\n"
"data: bytes-like CommitLog bytes, data[0] at CommitLog offset base_offset; starts: int64 buffer of record\n"
"positions in data (each record whole inside data); out: writable int64 buffer of len(LOCATED_ROWS) rows of\n"
"len(starts) values, filled row by row in LOCATED_ROWS' order (positions and lengths in bytes, hosts packed\n"
"as IPv4 << 32 | port or 0 for an IPv6 host). Returns (None, -1) when every record is consistent, else the\n"
"field of the first check that some record fails (TOTALSIZE: too small for the hosts; PHYSICALOFFSET: not\n"
"base_offset + start; BODY, TOPIC: the length does not fit in TOTALSIZE or is negative; PROPERTIES: does\n"
"not end at the record's end or is negative) and the first record that fails it; the rows of records\n"
"after a failed check are not meaningful. Layout: docs/protocol.md §1.2. Raises ValueError for buffers of\n"
"the wrong size or a record that does not lie inside data.";

/* Fill out[row * n + i] for record i; returns the first check it fails, or CHECK_COUNT. */
static enum located_check locate_one(const unsigned char *data, int64_t s, int64_t offset, int64_t *out,
                                     Py_ssize_t n, Py_ssize_t i)
{
    const unsigned char *rec = data + s;
    int64_t total = (int32_t)load_be32(rec + TOTALSIZE_POSITION), rec_end = s + total;
    int32_t sys_flag = (int32_t)load_be32(rec + SYSFLAG_POSITION);
    int born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0, store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0;
    int64_t born_extra = born_v6 ? HOST_V6_BYTES - HOST_V4_BYTES : 0;
    int64_t extra = born_extra + (store_v6 ? HOST_V6_BYTES - HOST_V4_BYTES : 0);
#define OUT(row) out[(Py_ssize_t)(row) * n + i]
    OUT(ROW_TOTAL) = total;
    OUT(ROW_SYS_FLAG) = sys_flag;
    if (BODY_POSITION + extra + 4 + 1 + 2 > total) /* BODY, TOPIC and PROPERTIES length prefixes */
        return CHECK_TOTALSIZE;
    OUT(ROW_CRC) = (int32_t)load_be32(rec + BODYCRC_POSITION);
    OUT(ROW_QUEUE_ID) = (int32_t)load_be32(rec + QUEUEID_POSITION);
    OUT(ROW_FLAG) = (int32_t)load_be32(rec + FLAG_POSITION);
    OUT(ROW_QUEUE_OFFSET) = (int64_t)load_be64(rec + QUEUEOFFSET_POSITION);
    OUT(ROW_BORN_TS) = (int64_t)load_be64(rec + BORNTIMESTAMP_POSITION);
    OUT(ROW_BORN_HOST_POS) = s + BORNHOST_POSITION;
    OUT(ROW_BORN_PACKED) = born_v6 ? 0 : (int64_t)load_be64(rec + BORNHOST_POSITION);
    OUT(ROW_STORE_TS) = (int64_t)load_be64(rec + STORETIMESTAMP_POSITION + born_extra);
    OUT(ROW_STORE_HOST_POS) = s + STOREHOSTADDRESS_POSITION + born_extra;
    OUT(ROW_STORE_PACKED) = store_v6 ? 0 : (int64_t)load_be64(rec + STOREHOSTADDRESS_POSITION + born_extra);
    OUT(ROW_RECON) = (int32_t)load_be32(rec + RECONSUMETIMES_POSITION + extra);
    OUT(ROW_PREPARED) = (int64_t)load_be64(rec + PREPAREDTRANSACTIONOFFSET_POSITION + extra);
    if ((int64_t)load_be64(rec + PHYSICALOFFSET_POSITION) != offset)
        return CHECK_PHYSICALOFFSET;
    int64_t body_len_pos = s + BODY_POSITION + extra;
    int64_t body_len = (int32_t)load_be32(data + body_len_pos);
    int64_t topic_len_pos = body_len_pos + 4 + (body_len > 0 ? body_len : 0);
    int v2 = load_be32(rec + MAGICCODE_POSITION) == MESSAGE_MAGIC_CODE_V2;
    int64_t prefix = v2 ? 2 : 1;
    OUT(ROW_BODY_POS) = body_len_pos + 4;
    OUT(ROW_BODY_LEN) = body_len;
    if (body_len < 0 || topic_len_pos + prefix + 2 > rec_end)
        return CHECK_BODY;
    const unsigned char *t = data + topic_len_pos;
    int64_t topic_len = v2 ? (int16_t)(((uint16_t)t[0] << 8) | t[1]) : (int8_t)t[0];
    int64_t props_len_pos = topic_len_pos + prefix + (topic_len > 0 ? topic_len : 0);
    OUT(ROW_TOPIC_POS) = topic_len_pos + prefix;
    OUT(ROW_TOPIC_LEN) = topic_len;
    if (topic_len < 0 || props_len_pos + 2 > rec_end)
        return CHECK_TOPIC;
    const unsigned char *p = data + props_len_pos;
    int64_t props_len = (int16_t)(((uint16_t)p[0] << 8) | p[1]);
    OUT(ROW_PROPS_POS) = props_len_pos + 2;
    OUT(ROW_PROPS_LEN) = props_len;
    if (props_len < 0 || props_len_pos + 2 + props_len != rec_end)
        return CHECK_PROPERTIES;
#undef OUT
    return CHECK_COUNT;
}

PyObject *locate_records(PyObject *self, PyObject *args)
{
    Py_buffer data, starts, out;
    long long base_offset;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*Lw*", &data, &starts, &base_offset, &out))
        return NULL;
    PyObject *result = NULL;
    if (require_items(&starts, 8, "starts") < 0)
        goto done;
    Py_ssize_t n = starts.len / 8;
    if (out.len != (Py_ssize_t)LOCATED_ROW_COUNT * n * 8) {
        PyErr_Format(PyExc_ValueError, "out: %zd bytes, not %d rows of %zd int64 values", out.len,
                     (int)LOCATED_ROW_COUNT, n);
        goto done;
    }
    const unsigned char *base = data.buf;
    const int64_t *start = starts.buf;
    int64_t *rows = out.buf;
    Py_ssize_t first_bad[CHECK_COUNT], outside = -1;
    for (int c = 0; c < CHECK_COUNT; c++)
        first_bad[c] = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = start[i];
        if (s < 0 || s > data.len - MIN_RECORD_SIZE_BYTES
            || (int32_t)load_be32(base + s + TOTALSIZE_POSITION) > data.len - s) {
            outside = i;
            break;
        }
        enum located_check failed = locate_one(base, s, base_offset + s, rows, n, i);
        if (failed != CHECK_COUNT && first_bad[failed] < 0)
            first_bad[failed] = i;
    }
    Py_END_ALLOW_THREADS
    if (outside >= 0) {
        PyErr_Format(PyExc_ValueError, "starts[%zd]: the record at %lld does not lie inside data (%zd bytes)",
                     outside, (long long)start[outside], data.len);
        goto done;
    }
    for (int c = 0; c < CHECK_COUNT; c++)
        if (first_bad[c] >= 0) {
            result = Py_BuildValue("sn", check_fields[c], first_bad[c]);
            goto done;
        }
    result = Py_BuildValue("On", Py_None, (Py_ssize_t)-1);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&out);
    return result;
}

/* A tuple of the C strings `names` as the module attribute `attr`. */
static int add_names(PyObject *module, const char *attr, const char *const *names, Py_ssize_t count)
{
    PyObject *tuple = PyTuple_New(count);
    if (tuple == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        if (name == NULL) {
            Py_DECREF(tuple);
            return -1;
        }
        PyTuple_SET_ITEM(tuple, i, name);
    }
    return PyModule_AddObject(module, attr, tuple) < 0 ? (Py_DECREF(tuple), -1) : 0;
}

/* The module attributes LOCATED_ROWS (locate_records' output rows, in order) and LOCATED_CHECKS (the fields of
 * its checks, in the order they are applied; a test checks them against connector.decode.locate.CHECKS). */
int add_locate_names(PyObject *module)
{
    if (add_names(module, "LOCATED_ROWS", located_row_names, LOCATED_ROW_COUNT) < 0)
        return -1;
    return add_names(module, "LOCATED_CHECKS", check_fields, CHECK_COUNT);
}
