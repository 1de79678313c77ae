/*
 * What the native kernel's C files share (connector/decode/_decode_kernel.c, _decode_locate.c and
 * _encode_records.c): the record layout constants, big-endian loads and argument checks, and the functions one
 * file defines for another.
 */
#ifndef HAREPLICA_DECODE_KERNEL_H
#define HAREPLICA_DECODE_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Record layout and SYSFLAG bits: C cannot import connector/protocol/commitlog/layout.py (docs/protocol.md §1.2,
 * §1.4), so the kernel keeps this copy; the module exports every value and a test checks them against the table.
 * Positions are those of a record with IPv4 hosts; a host with its SYSFLAG bit set is 20 bytes instead of 8. */
#define TOTALSIZE_POSITION 0
#define MAGICCODE_POSITION 4
#define BODYCRC_POSITION 8
#define QUEUEID_POSITION 12
#define FLAG_POSITION 16
#define QUEUEOFFSET_POSITION 20
#define PHYSICALOFFSET_POSITION 28
#define SYSFLAG_POSITION 36
#define BORNTIMESTAMP_POSITION 40
#define BORNHOST_POSITION 48
#define STORETIMESTAMP_POSITION 56
#define STOREHOSTADDRESS_POSITION 64
#define RECONSUMETIMES_POSITION 72
#define PREPAREDTRANSACTIONOFFSET_POSITION 76
#define BODY_POSITION 84
#define HOST_V4_BYTES 8
#define HOST_V6_BYTES 20
#define MESSAGE_MAGIC_CODE 0xDAA320A7u
#define MESSAGE_MAGIC_CODE_V2 0xDAA320ABu
#define MIN_RECORD_SIZE_BYTES 91
#define COMPRESSED_FLAG 0x1
#define BORNHOST_V6_FLAG 0x10
#define STOREHOSTADDRESS_V6_FLAG 0x20
#define COMPRESSION_TYPE_COMPARATOR 0x700
#define COMPRESSION_ZLIB_TYPE 0x300
#define ARROW_INT32_MAX 0x7FFFFFFF
#define BODYCRC_MASK 0x7FFFFFFFu

static inline uint32_t load_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint64_t load_be64(const unsigned char *p)
{
    return ((uint64_t)load_be32(p) << 32) | (uint64_t)load_be32(p + 4);
}

static inline int require_items(Py_buffer *view, Py_ssize_t itemsize, const char *name)
{
    if (view->len % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: buffer of %zd bytes is not a whole number of %zd-byte items", name,
                     view->len, itemsize);
        return -1;
    }
    return 0;
}

/* connector/decode/_decode_locate.c */
extern const char locate_records_doc[];
PyObject *locate_records(PyObject *self, PyObject *args);
int add_locate_names(PyObject *module);

/* connector/decode/_encode_records.c: the restore's encoder (connector/restore/encode.py) */
extern const char encode_records_doc[];
PyObject *encode_records(PyObject *self, PyObject *args);

#endif
