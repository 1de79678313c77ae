/*
 * Native hot loops of the CommitLog → Arrow decoder (connector/decode/native_kernels.py).
 *
 * Four functions, all over Python buffers (no NumPy C API, so the build needs only a C compiler, the
 * Python headers and zlib); the fourth, locate_records, is in connector/decode/_decode_locate.c:
 *
 *   walk_records(region, starts, totals) -> (count, stop)
 *       Follows the TOTALSIZE chain of complete MESSAGE records from region[0] (RocketMQ 4.9.8
 *       CommitLog record layout, docs/protocol.md §1.2: TOTALSIZE int32 BE at +0, MAGICCODE int32 BE at +4).
 *
 *   Module constants: the layout values of connector/decode/_decode_kernel.h (TOTALSIZE_POSITION,
 *   MESSAGE_MAGIC_CODE, ...) and the body codes below, so that a test checks them against
 *   connector/protocol/commitlog/layout.py,
 *   the one layout table; LOCATED_ROWS and LOCATED_CHECKS, the rows and the checks of locate_records.
 *
 *   gather_bodies(data, pos, length, sys_flag, first, decompress, max_bytes, crc, verify_crc, max_inflated)
 *           -> (end, offsets, values, bad)
 *       Copies (or inflates, docs/protocol.md §1.4) the bodies of rows [first, end) into one contiguous buffer and
 *       the int32 Arrow offsets of a BinaryArray over it; checks BODYCRC (docs/protocol.md §1.6) and bounds every
 *       inflated body (a zip bomb never allocates past the bound). A bad body is kept as stored and
 *       reported, never stops the gather (docs/source.md, "Bad records").
 *
 *   split_properties(data, pos, length, specials) -> (map_offsets, name_offsets, names, value_offsets,
 *                                                     values, hits)
 *       Splits every record's PROPERTIES (docs/protocol.md §1.5) into the buffers of an Arrow map<string, string>.
 *
 *   locate_records(data, starts, base_offset, out) -> (field, index)
 *       Every fixed field of the records and where their variable-length fields lie, checked as
 *       connector/decode/locate.py checks them (docs/protocol.md §1.2).
 *
 * BODYCRC is checked with libdeflate_crc32 when libdeflate is loaded, else with zlib's crc32.
 *
 * Inflation uses libdeflate (a whole-buffer DEFLATE decoder, about twice as fast as zlib 1.2) when the
 * system has libdeflate.so.0, loaded at import through its public C API; otherwise zlib. Both accept
 * the same streams (zlib wrapper, Adler-32 checked, bytes after the stream ignored, as Java's
 * InflaterInputStream and Python's zlib.decompress do).
 *
 * The decoder keeps a pure NumPy path with the same results; tests compare the two.
 */
#include "_decode_kernel.h"
#include <dlfcn.h>
#include <zlib.h>

/* why a body was kept as stored (the codes gather_bodies reports; connector/decode/native_kernels.py names them) */
enum bad_body { BAD_BODYCRC = 1, BAD_INFLATE = 2, BAD_COMPRESSION_TYPE = 3, BAD_TOO_LARGE = 4 };

/* libdeflate's public API (libdeflate.h, stable since 1.0); looked up at import, never required. */
enum { LIBDEFLATE_SUCCESS = 0, LIBDEFLATE_INSUFFICIENT_SPACE = 3 };
typedef void *(*ld_alloc_fn)(void);
typedef void (*ld_free_fn)(void *);
typedef int (*ld_zlib_decompress_ex_fn)(void *, const void *, size_t, void *, size_t, size_t *, size_t *);
typedef uint32_t (*ld_crc32_fn)(uint32_t, const void *, size_t);
static ld_alloc_fn ld_alloc_decompressor = NULL;
static ld_free_fn ld_free_decompressor = NULL;
static ld_zlib_decompress_ex_fn ld_zlib_decompress_ex = NULL; /* NULL: inflate with zlib */
static ld_crc32_fn ld_crc32 = NULL;                           /* NULL: zlib's crc32 */

/* BODYCRC of a stored body: CRC-32 (IEEE, as java.util.zip.CRC32) masked to 31 bits (docs/protocol.md §1.6). */
static uint32_t body_crc(const unsigned char *p, Py_ssize_t len)
{
    uint32_t crc;
    if (ld_crc32 != NULL) {
        crc = ld_crc32(0, p, (size_t)len);
    } else {
        uLong c = crc32(0L, Z_NULL, 0);
        while (len > 0) { /* zlib takes uInt lengths */
            uInt step = len > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)len;
            c = crc32(c, p, step);
            p += step;
            len -= step;
        }
        crc = (uint32_t)c;
    }
    return crc & BODYCRC_MASK;
}

PyDoc_STRVAR(walk_records_doc,
"walk_records(region, starts, totals) -> (count, stop)\n\n"
"Follow the chain of complete MESSAGE records that begins at region[0].\n\n"
"region: bytes-like CommitLog bytes; starts, totals: writable int64 buffers (positions and TOTALSIZE\n"
"in bytes). Stops before the first record that is not a MESSAGE (blank, bad MAGICCODE, zeros), whose\n"
"TOTALSIZE is below 91 bytes or that is not complete in region, or when starts is full. Returns how\n"
"many records were written and the position (bytes) where the walk stopped. Record layout: RocketMQ\n"
"4.9.8 CommitLog, docs/protocol.md §1.2. Raises ValueError for buffers of the wrong item size.");

static PyObject *walk_records(PyObject *self, PyObject *args)
{
    Py_buffer region, starts, totals;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*w*", &region, &starts, &totals))
        return NULL;
    PyObject *result = NULL;
    if (require_items(&starts, 8, "starts") < 0 || require_items(&totals, 8, "totals") < 0)
        goto done;
    Py_ssize_t capacity = starts.len / 8 < totals.len / 8 ? starts.len / 8 : totals.len / 8;
    const unsigned char *base = region.buf;
    Py_ssize_t size = region.len, pos = 0, count = 0;
    int64_t *out_start = starts.buf, *out_total = totals.buf;
    Py_BEGIN_ALLOW_THREADS
    while (count < capacity && size - pos >= 8) {
        const unsigned char *rec = base + pos;
        if (load_be32(rec + MAGICCODE_POSITION) != MESSAGE_MAGIC_CODE)
            break;
        int32_t total = (int32_t)load_be32(rec + TOTALSIZE_POSITION);
        if (total < MIN_RECORD_SIZE_BYTES || total > size - pos)
            break;
        out_start[count] = pos;
        out_total[count] = total;
        count++;
        pos += total;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nn", count, pos);
done:
    PyBuffer_Release(&region);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&totals);
    return result;
}

/* Outcome of one body, decided without the GIL. */
enum body_status { BODY_OK, BODY_BAD, BODY_INFLATES_PAST_BOUND, BODY_GROUP_FULL, BODY_TOO_LARGE, BODY_NO_MEMORY,
                   BODY_ZLIB_STATE };

/* State of one gather_bodies call; `values` is only resized with the GIL held. */
struct gather {
    PyObject *values;        /* bytearray of the group's body bytes */
    Py_ssize_t used;         /* bytes of `values` in use */
    z_stream zs;
    int zinit;
    void *ld;                /* a libdeflate decompressor of this call, or NULL for zlib */
    PyThreadState *thread;   /* saved while the GIL is released */
};

/* Make room for `need` bytes in g->values; re-takes the GIL for the resize. */
static int reserve(struct gather *g, Py_ssize_t need)
{
    Py_ssize_t have = PyByteArray_GET_SIZE(g->values);
    if (need <= have)
        return 0;
    Py_ssize_t size = have * 2 > need ? have * 2 : need;
    PyEval_RestoreThread(g->thread);
    int rc = PyByteArray_Resize(g->values, size);
    if (rc < 0)
        PyErr_Clear(); /* reported as BODY_NO_MEMORY */
    g->thread = PyEval_SaveThread();
    return rc;
}

static char *values_at(struct gather *g, Py_ssize_t at)
{
    return PyByteArray_AS_STRING(g->values) + at;
}

/* Inflate one zlib-wrapped body to g->values[g->used:]; on BODY_OK, *out_len is its inflated size.
 * The output never grows past max_out + 1 bytes: one byte more than allowed tells BODY_INFLATES_PAST_BOUND. */
static enum body_status inflate_body(struct gather *g, const unsigned char *in, Py_ssize_t in_len,
                                     Py_ssize_t max_out, Py_ssize_t *out_len)
{
    Py_ssize_t cap = max_out + 1;
    Py_ssize_t want = in_len * 8 > 65536 ? in_len * 8 : 65536;
    if (want > cap)
        want = cap;
    if (g->ld != NULL) {
        for (;;) {
            if (reserve(g, g->used + want) < 0)
                return BODY_NO_MEMORY;
            Py_ssize_t room = PyByteArray_GET_SIZE(g->values) - g->used; /* all the room there is, up to cap */
            if (room > cap)
                room = cap;
            want = room;
            size_t in_used = 0, produced = 0;
            int rc = ld_zlib_decompress_ex(g->ld, in, (size_t)in_len, values_at(g, g->used), (size_t)room, &in_used,
                                           &produced);
            if (rc == LIBDEFLATE_SUCCESS) {
                if ((Py_ssize_t)produced > max_out)
                    return BODY_INFLATES_PAST_BOUND;
                *out_len = (Py_ssize_t)produced;
                return BODY_OK;
            }
            if (rc != LIBDEFLATE_INSUFFICIENT_SPACE)
                return BODY_BAD;
            if (want >= cap)
                return BODY_INFLATES_PAST_BOUND;
            want = want * 2 < cap ? want * 2 : cap; /* inflate it again into twice the room */
        }
    }
    if (!g->zinit) {
        if (inflateInit(&g->zs) != Z_OK)
            return BODY_ZLIB_STATE;
        g->zinit = 1;
    } else if (inflateReset(&g->zs) != Z_OK) {
        return BODY_ZLIB_STATE;
    }
    g->zs.next_in = (Bytef *)in;
    g->zs.avail_in = (uInt)in_len;
    Py_ssize_t produced = 0;
    for (;;) {
        if (reserve(g, g->used + want) < 0)
            return BODY_NO_MEMORY;
        Py_ssize_t room = PyByteArray_GET_SIZE(g->values) - g->used; /* all the room there is, up to cap */
        if (room > cap)
            room = cap;
        want = room;
        room -= produced;
        if (room > (Py_ssize_t)UINT32_MAX)
            room = (Py_ssize_t)UINT32_MAX;
        g->zs.next_out = (Bytef *)values_at(g, g->used + produced);
        g->zs.avail_out = (uInt)room;
        int rc = inflate(&g->zs, Z_NO_FLUSH);
        produced += room - (Py_ssize_t)g->zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (produced > max_out)
                return BODY_INFLATES_PAST_BOUND;
            *out_len = produced;
            return BODY_OK;
        }
        if (g->zs.avail_out == 0 && (rc == Z_OK || rc == Z_BUF_ERROR)) {
            if (produced >= cap)
                return BODY_INFLATES_PAST_BOUND;
            want = want * 2 < cap ? want * 2 : cap; /* output full: grow and go on */
            continue;
        }
        return BODY_BAD; /* corrupt, truncated, or asks for a preset dictionary */
    }
}

PyDoc_STRVAR(gather_bodies_doc,
"gather_bodies(data, pos, length, sys_flag, first, decompress, max_bytes, crc, verify_crc, max_inflated)\n"
"    -> (end, offsets, values, bad)\n\n"
"Bodies of rows first, first+1, ... as one BinaryArray's buffers.\n\n"
"data: bytes-like CommitLog bytes; pos, length: int64 buffers (body position in data and stored body\n"
"length, bytes); sys_flag, crc: int32 buffers (the records' SYSFLAG and BODYCRC). With verify_crc true,\n"
"a body whose CRC-32 masked to 31 bits differs from its BODYCRC is kept as stored (docs/protocol.md §1.6). With\n"
"decompress true, a body whose SYSFLAG has COMPRESSED_FLAG and the ZLIB type (0x300, or 0 from\n"
"producers before 4.9.4; docs/protocol.md §1.4) is inflated, to at most max_inflated bytes (the inflater never\n"
"writes more than one byte past it); other bodies are copied as stored. A body that does not inflate,\n"
"has another compression type or inflates past max_inflated is kept as stored too. Rows are taken until\n"
"the end, or until the next row's body would take the values past max_bytes (bytes, at least one row,\n"
"and never past 2^31-1, the int32 Arrow offset limit). Returns end (first row not taken), offsets\n"
"(bytearray of end-first+1 int32), values (bytearray) and bad: a bytearray of int32 pairs (row, code)\n"
"for the rows kept as stored, code 1 BODYCRC mismatch, 2 does not inflate, 3 compression type not\n"
"inflated here, 4 inflates past max_inflated. The GIL is released while bodies are checked and copied.\n"
"Raises ValueError for inconsistent buffers or a single body over 2^31-1 bytes, MemoryError.");

/* The body of one row into g->values[g->used:] (inflated, or as stored); *body is its size, *code the
 * reason it was kept as stored (0: it was not). */
static enum body_status gather_one(struct gather *g, const unsigned char *src, Py_ssize_t len, int32_t flag,
                                   int32_t crc, int decompress, int verify_crc, Py_ssize_t max_inflated,
                                   Py_ssize_t *body, int *code)
{
    enum body_status status = BODY_OK;
    *code = 0;
    if (verify_crc && body_crc(src, len) != (uint32_t)crc)
        *code = BAD_BODYCRC;
    else if (decompress && (flag & COMPRESSED_FLAG)) {
        int kind = flag & COMPRESSION_TYPE_COMPARATOR;
        if (kind != 0 && kind != COMPRESSION_ZLIB_TYPE)
            *code = BAD_COMPRESSION_TYPE;
        else {
            status = inflate_body(g, src, len, max_inflated, body);
            if (status == BODY_BAD)
                *code = BAD_INFLATE;
            else if (status == BODY_INFLATES_PAST_BOUND)
                *code = BAD_TOO_LARGE;
            else
                return status; /* BODY_OK or an error of the whole call */
        }
    }
    *body = len; /* as stored */
    if (reserve(g, g->used + len) < 0)
        return BODY_NO_MEMORY;
    memcpy(values_at(g, g->used), src, (size_t)len);
    return BODY_OK;
}

static PyObject *gather_bodies(PyObject *self, PyObject *args)
{
    Py_buffer data, pos_b, len_b, flag_b, crc_b;
    Py_ssize_t first, max_bytes, max_inflated;
    int decompress, verify_crc;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*npny*pn", &data, &pos_b, &len_b, &flag_b, &first, &decompress, &max_bytes,
                          &crc_b, &verify_crc, &max_inflated))
        return NULL;
    PyObject *result = NULL, *offsets = NULL, *bad = NULL;
    struct gather g;
    memset(&g, 0, sizeof(g));
    if (require_items(&pos_b, 8, "pos") < 0 || require_items(&len_b, 8, "length") < 0 ||
        require_items(&flag_b, 4, "sys_flag") < 0 || require_items(&crc_b, 4, "crc") < 0)
        goto done;
    Py_ssize_t n = pos_b.len / 8;
    if (len_b.len / 8 != n || flag_b.len / 4 != n || (verify_crc && crc_b.len / 4 != n) || first < 0 || first > n) {
        PyErr_SetString(PyExc_ValueError,
                        "pos, length, sys_flag (and crc when verified) must have one item per row, first <= rows");
        goto done;
    }
    if (max_bytes > ARROW_INT32_MAX || max_bytes <= 0)
        max_bytes = ARROW_INT32_MAX;
    if (max_inflated > ARROW_INT32_MAX - 1 || max_inflated <= 0)
        max_inflated = ARROW_INT32_MAX - 1;
    const int64_t *pos = pos_b.buf, *len = len_b.buf;
    const int32_t *flag = flag_b.buf, *crc = crc_b.buf;
    const unsigned char *src = data.buf;
    Py_ssize_t guess = 0; /* the stored size of the rows is the first guess; inflated rows grow it */
    for (Py_ssize_t r = first; r < n; r++) {
        if (pos[r] < 0 || len[r] < 0 || pos[r] + len[r] > data.len) {
            PyErr_Format(PyExc_ValueError, "row %zd: body [%lld, +%lld) lies outside the %zd data bytes", r,
                         (long long)pos[r], (long long)len[r], data.len);
            goto done;
        }
        if (guess < max_bytes)
            guess += (Py_ssize_t)len[r];
    }
    offsets = PyByteArray_FromStringAndSize(NULL, (n - first + 1) * 4);
    bad = PyByteArray_FromStringAndSize(NULL, (n - first) * 8 + 1);
    g.values = PyByteArray_FromStringAndSize(NULL, guess < max_bytes ? guess + 1 : max_bytes);
    if (offsets == NULL || bad == NULL || g.values == NULL)
        goto done;
    if (decompress && ld_zlib_decompress_ex != NULL && (g.ld = ld_alloc_decompressor()) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *off = (int32_t *)PyByteArray_AS_STRING(offsets);
    int32_t *bad_rows = (int32_t *)PyByteArray_AS_STRING(bad);
    Py_ssize_t row = first, nbad = 0;
    enum body_status status = BODY_OK;
    off[0] = 0;
    g.thread = PyEval_SaveThread();
    for (; row < n; row++) {
        Py_ssize_t body;
        int code;
        status = gather_one(&g, src + pos[row], (Py_ssize_t)len[row], flag[row], verify_crc ? crc[row] : 0,
                            decompress, verify_crc, max_inflated, &body, &code);
        if (status == BODY_OK && g.used + body > (row > first ? max_bytes : ARROW_INT32_MAX))
            status = row > first ? BODY_GROUP_FULL : BODY_TOO_LARGE;
        if (status != BODY_OK)
            break;
        if (code != 0) {
            bad_rows[2 * nbad] = (int32_t)row;
            bad_rows[2 * nbad + 1] = code;
            nbad++;
        }
        g.used += body;
        off[row - first + 1] = (int32_t)g.used;
    }
    PyEval_RestoreThread(g.thread);
    switch (status) {
    case BODY_OK:
    case BODY_GROUP_FULL:
        break; /* the group ends before `row` */
    case BODY_TOO_LARGE:
        PyErr_Format(PyExc_ValueError, "row %zd: body exceeds 2^31-1 bytes", row);
        goto done;
    case BODY_NO_MEMORY:
        PyErr_NoMemory();
        goto done;
    case BODY_ZLIB_STATE:
        PyErr_SetString(PyExc_MemoryError, "zlib could not set up an inflate stream");
        goto done;
    default:
        PyErr_Format(PyExc_SystemError, "row %zd: unexpected body status %d", row, (int)status);
        goto done;
    }
    if (PyByteArray_Resize(offsets, (row - first + 1) * 4) < 0 || PyByteArray_Resize(g.values, g.used) < 0 ||
        PyByteArray_Resize(bad, nbad * 8) < 0)
        goto done;
    result = Py_BuildValue("nOOO", row, offsets, g.values, bad);
done:
    if (g.zinit)
        inflateEnd(&g.zs);
    if (g.ld != NULL)
        ld_free_decompressor(g.ld);
    Py_XDECREF(offsets);
    Py_XDECREF(bad);
    Py_XDECREF(g.values);
    PyBuffer_Release(&data);
    PyBuffer_Release(&pos_b);
    PyBuffer_Release(&len_b);
    PyBuffer_Release(&flag_b);
    PyBuffer_Release(&crc_b);
    return result;
}

PyDoc_STRVAR(split_properties_doc,
"split_properties(data, pos, length, specials) -> (map_offsets, name_offsets, names, value_offsets, values, hits)\n\n"
"The properties of every record as the buffers of an Arrow map<string, string>.\n\n"
"data: bytes-like CommitLog bytes; pos, length: int64 buffers (PROPERTIES position and length of each\n"
"record, bytes); specials: a tuple of property names (bytes) to find. RocketMQ 4.9.8\n"
"string2messageProperties rules (docs/protocol.md §1.5): pairs are name 0x01 value joined by 0x02; a segment is cut\n"
"at its first 0x01, which must be neither its first nor its last byte (else the segment is skipped);\n"
"a later duplicate name in one record wins (the earlier entry is dropped). Returns map_offsets\n"
"(int32, rows+1 entries), the int32 offsets and bytes of all names and of all values (entries in\n"
"stored order), and hits: int64, len(specials) x rows, the entry index of each special name per row or\n"
"-1. Bytes are not checked as UTF-8 (the caller validates the arrays). The GIL is released.");

static PyObject *split_properties(PyObject *self, PyObject *args)
{
    Py_buffer data, pos_b, len_b;
    PyObject *specials;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*O!", &data, &pos_b, &len_b, &PyTuple_Type, &specials))
        return NULL;
    PyObject *result = NULL, *map_off = NULL, *name_off = NULL, *names = NULL, *value_off = NULL, *values = NULL;
    PyObject *hits = NULL;
    Py_ssize_t nspecial = PyTuple_GET_SIZE(specials);
    const char *special_name[8];
    Py_ssize_t special_len[8];
    if (nspecial > 8) {
        PyErr_SetString(PyExc_ValueError, "at most 8 special property names");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nspecial; k++) {
        PyObject *item = PyTuple_GET_ITEM(specials, k);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "special property names must be bytes");
            goto done;
        }
        special_name[k] = PyBytes_AS_STRING(item);
        special_len[k] = PyBytes_GET_SIZE(item);
    }
    if (require_items(&pos_b, 8, "pos") < 0 || require_items(&len_b, 8, "length") < 0)
        goto done;
    Py_ssize_t n = pos_b.len / 8;
    if (len_b.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "pos and length must have one item per row");
        goto done;
    }
    const int64_t *pos = pos_b.buf, *len = len_b.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        if (pos[r] < 0 || len[r] < 0 || pos[r] + len[r] > data.len) {
            PyErr_Format(PyExc_ValueError, "row %zd: properties [%lld, +%lld) lie outside the %zd data bytes", r,
                         (long long)pos[r], (long long)len[r], data.len);
            goto done;
        }
        total += (Py_ssize_t)len[r];
    }
    if (total > ARROW_INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "properties of more than 2^31-1 bytes in one call (int32 Arrow offsets)");
        goto done;
    }
    /* a kept entry takes at least 4 bytes (name, 0x01, value, 0x02) except the last of a record */
    Py_ssize_t max_entries = total / 3 + 1;
    map_off = PyByteArray_FromStringAndSize(NULL, (n + 1) * 4);
    name_off = PyByteArray_FromStringAndSize(NULL, (max_entries + 1) * 4);
    value_off = PyByteArray_FromStringAndSize(NULL, (max_entries + 1) * 4);
    names = PyByteArray_FromStringAndSize(NULL, total + 1);
    values = PyByteArray_FromStringAndSize(NULL, total + 1);
    hits = PyByteArray_FromStringAndSize(NULL, (nspecial * n + 1) * 8);
    if (map_off == NULL || name_off == NULL || value_off == NULL || names == NULL || values == NULL || hits == NULL)
        goto done;
    int32_t *moff = (int32_t *)PyByteArray_AS_STRING(map_off);
    int32_t *noff = (int32_t *)PyByteArray_AS_STRING(name_off);
    int32_t *voff = (int32_t *)PyByteArray_AS_STRING(value_off);
    char *ndata = PyByteArray_AS_STRING(names), *vdata = PyByteArray_AS_STRING(values);
    int64_t *hit = (int64_t *)PyByteArray_AS_STRING(hits);
    const char *src = data.buf;
    Py_ssize_t entries = 0, nbytes = 0, vbytes = 0;
    Py_BEGIN_ALLOW_THREADS
    moff[0] = noff[0] = voff[0] = 0;
    for (Py_ssize_t k = 0; k < nspecial * n; k++)
        hit[k] = -1;
    for (Py_ssize_t r = 0; r < n; r++) {
        const char *p = src + pos[r], *end = p + len[r];
        Py_ssize_t first_entry = entries;
        while (p < end) {
            const char *seg_end = memchr(p, 0x02, (size_t)(end - p));
            if (seg_end == NULL)
                seg_end = end;
            const char *kv = memchr(p, 0x01, (size_t)(seg_end - p));
            if (kv != NULL && kv > p && kv < seg_end - 1) {
                Py_ssize_t name_len = kv - p, value_len = seg_end - kv - 1;
                /* a later duplicate wins: drop an earlier entry of this record with the same name */
                for (Py_ssize_t e = first_entry; e < entries; e++) {
                    if (noff[e + 1] - noff[e] == name_len && memcmp(ndata + noff[e], p, (size_t)name_len) == 0) {
                        Py_ssize_t gone_n = name_len, gone_v = voff[e + 1] - voff[e];
                        memmove(ndata + noff[e], ndata + noff[e + 1], (size_t)(nbytes - noff[e + 1]));
                        memmove(vdata + voff[e], vdata + voff[e + 1], (size_t)(vbytes - voff[e + 1]));
                        for (Py_ssize_t f = e + 1; f < entries; f++) {
                            noff[f] = noff[f + 1] - (int32_t)gone_n;
                            voff[f] = voff[f + 1] - (int32_t)gone_v;
                        }
                        nbytes -= gone_n;
                        vbytes -= gone_v;
                        entries--;
                        break; /* at most one earlier entry can share the name */
                    }
                }
                memcpy(ndata + nbytes, p, (size_t)name_len);
                memcpy(vdata + vbytes, kv + 1, (size_t)value_len);
                nbytes += name_len;
                vbytes += value_len;
                entries++;
                noff[entries] = (int32_t)nbytes;
                voff[entries] = (int32_t)vbytes;
            }
            p = seg_end + 1;
        }
        moff[r + 1] = (int32_t)entries;
        for (Py_ssize_t e = first_entry; e < entries; e++) {
            Py_ssize_t name_len = noff[e + 1] - noff[e];
            for (Py_ssize_t k = 0; k < nspecial; k++)
                if (name_len == special_len[k] && memcmp(ndata + noff[e], special_name[k], (size_t)name_len) == 0)
                    hit[k * n + r] = e;
        }
    }
    Py_END_ALLOW_THREADS
    if (PyByteArray_Resize(name_off, (entries + 1) * 4) < 0 || PyByteArray_Resize(value_off, (entries + 1) * 4) < 0 ||
        PyByteArray_Resize(names, nbytes) < 0 || PyByteArray_Resize(values, vbytes) < 0 ||
        PyByteArray_Resize(hits, nspecial * n * 8) < 0)
        goto done;
    result = PyTuple_Pack(6, map_off, name_off, names, value_off, values, hits);
done:
    Py_XDECREF(map_off);
    Py_XDECREF(name_off);
    Py_XDECREF(names);
    Py_XDECREF(value_off);
    Py_XDECREF(values);
    Py_XDECREF(hits);
    PyBuffer_Release(&data);
    PyBuffer_Release(&pos_b);
    PyBuffer_Release(&len_b);
    return result;
}

static PyMethodDef methods[] = {
    {"walk_records", walk_records, METH_VARARGS, walk_records_doc},
    {"gather_bodies", gather_bodies, METH_VARARGS, gather_bodies_doc},
    {"split_properties", split_properties, METH_VARARGS, split_properties_doc},
    {"locate_records", locate_records, METH_VARARGS, locate_records_doc},
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connector.decode._decode_kernel",
    "Native hot loops of connector.decode (record walk, body gather and inflate).", -1, methods,
    NULL, NULL, NULL, NULL,
};

static void load_libdeflate(void)
{
    void *lib = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return;
    ld_alloc_fn alloc = (ld_alloc_fn)dlsym(lib, "libdeflate_alloc_decompressor");
    ld_free_fn release = (ld_free_fn)dlsym(lib, "libdeflate_free_decompressor");
    ld_zlib_decompress_ex_fn fn = (ld_zlib_decompress_ex_fn)dlsym(lib, "libdeflate_zlib_decompress_ex");
    ld_crc32_fn crc_fn = (ld_crc32_fn)dlsym(lib, "libdeflate_crc32");
    if (alloc == NULL || release == NULL || fn == NULL) {
        dlclose(lib);
        return;
    }
    ld_alloc_decompressor = alloc;
    ld_free_decompressor = release;
    ld_zlib_decompress_ex = fn;
    ld_crc32 = crc_fn; /* may be NULL: zlib's crc32 then */
}

/* The layout constants and body codes above as module attributes (signed 32-bit values, as Python's). */
static int add_constants(PyObject *m)
{
#define CONSTANT(name) {#name, (long)(int32_t)(name)}
    static const struct { const char *name; long value; } constants[] = {
        CONSTANT(TOTALSIZE_POSITION), CONSTANT(MAGICCODE_POSITION), CONSTANT(BODYCRC_POSITION),
        CONSTANT(QUEUEID_POSITION), CONSTANT(FLAG_POSITION), CONSTANT(QUEUEOFFSET_POSITION),
        CONSTANT(PHYSICALOFFSET_POSITION), CONSTANT(SYSFLAG_POSITION), CONSTANT(BORNTIMESTAMP_POSITION),
        CONSTANT(BORNHOST_POSITION), CONSTANT(STORETIMESTAMP_POSITION), CONSTANT(STOREHOSTADDRESS_POSITION),
        CONSTANT(RECONSUMETIMES_POSITION), CONSTANT(PREPAREDTRANSACTIONOFFSET_POSITION), CONSTANT(BODY_POSITION),
        CONSTANT(HOST_V4_BYTES), CONSTANT(HOST_V6_BYTES), CONSTANT(MESSAGE_MAGIC_CODE), CONSTANT(MESSAGE_MAGIC_CODE_V2),
        CONSTANT(BORNHOST_V6_FLAG), CONSTANT(STOREHOSTADDRESS_V6_FLAG),
        CONSTANT(MIN_RECORD_SIZE_BYTES), CONSTANT(COMPRESSED_FLAG), CONSTANT(COMPRESSION_TYPE_COMPARATOR),
        CONSTANT(COMPRESSION_ZLIB_TYPE), CONSTANT(BODYCRC_MASK), CONSTANT(BAD_BODYCRC), CONSTANT(BAD_INFLATE),
        CONSTANT(BAD_COMPRESSION_TYPE), CONSTANT(BAD_TOO_LARGE),
    };
#undef CONSTANT
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
            return -1;
    return 0;
}

PyMODINIT_FUNC PyInit__decode_kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (add_constants(m) < 0 || add_locate_names(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (getenv("HAREPLICA_NO_LIBDEFLATE") == NULL)
        load_libdeflate();
    if (PyModule_AddStringConstant(m, "INFLATER", ld_zlib_decompress_ex != NULL ? "libdeflate" : "zlib") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
