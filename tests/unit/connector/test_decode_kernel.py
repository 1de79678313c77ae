"""The native decode kernel itself: how it was built, its layout constants, its inflaters, its argument checks."""

from __future__ import annotations

import ctypes.util
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest

import connector
from connector.decode import _decode_kernel as kernel
from connector.decode import native_kernels
from connector.decode.kernels import PURE_PYTHON_ENV
from connector.protocol.commitlog import layout

# decode the fixture CommitLog and print a digest of every column (run in a fresh process, so the
# kernel's import-time choice of inflater follows the environment)
_DIGEST = r"""
import hashlib, sys
from pathlib import Path
import pyarrow as pa
from connector.decode import _decode_kernel
from connector.decode.stream import CommitLogArrowDecoder
files = sorted(Path(sys.argv[1]).iterdir())
data = b"".join(f.read_bytes() for f in files)
end = int(sys.argv[2])
table = pa.Table.from_batches(list(CommitLogArrowDecoder(0, end, 1048576, broker="b").decode_all([(0, data[:end])])))
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, table.schema) as w:
    w.write_table(table)
print(_decode_kernel.INFLATER, table.num_rows, hashlib.sha256(sink.getvalue()).hexdigest())
"""
MAX_OFFSET = 3402931


def _digest(fixture_dir, **env) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _DIGEST, str(fixture_dir / "commitlog"), str(MAX_OFFSET)],
                         capture_output=True, text=True, timeout=120, check=True, env={**os.environ, **env})
    return out.stdout.split()


#: The kernel's constants and the Python values they must equal (the layout table, the body codes' names).
KERNEL_CONSTANTS = {
    **{f"{f.name}_POSITION": layout.V4_POSITIONS[f.name] for f in layout.RECORD_FIELDS
       if f.name not in ("TOPIC", "PROPERTIES")},  # the C positions of BODY's length prefix and the fields before it
    "HOST_V4_BYTES": layout.HOST_V4_BYTES,
    "HOST_V6_BYTES": layout.HOST_V6_BYTES,
    "BORNHOST_V6_FLAG": layout.BORNHOST_V6_FLAG,
    "STOREHOSTADDRESS_V6_FLAG": layout.STOREHOSTADDRESS_V6_FLAG,
    "MESSAGE_MAGIC_CODE": layout.MESSAGE_MAGIC_CODE,
    "MESSAGE_MAGIC_CODE_V2": layout.MESSAGE_MAGIC_CODE_V2,
    "MIN_RECORD_SIZE_BYTES": layout.MIN_RECORD_SIZE_BYTES,
    "COMPRESSED_FLAG": layout.COMPRESSED_FLAG,
    "COMPRESSION_TYPE_COMPARATOR": layout.COMPRESSION_TYPE_COMPARATOR,
    "COMPRESSION_ZLIB_TYPE": layout.COMPRESSION_ZLIB_TYPE,
    "BODYCRC_MASK": layout.BODYCRC_MASK,
    "BAD_BODYCRC": native_kernels.BAD_BODYCRC,
    "BAD_INFLATE": native_kernels.BAD_INFLATE,
    "BAD_COMPRESSION_TYPE": native_kernels.BAD_COMPRESSION_TYPE,
    "BAD_TOO_LARGE": native_kernels.BAD_TOO_LARGE,
}


def test_the_kernels_layout_constants_equal_the_layout_table():
    # C cannot import the layout table, so the kernel keeps its own copy: the built module exports it, and
    # the source's #defines and enum are read here too (a kernel built from an older source fails as well)
    assert {name: getattr(kernel, name, None) for name in KERNEL_CONSTANTS} == KERNEL_CONSTANTS
    text = ""
    for name in ("_decode_kernel.h", "_decode_kernel.c"):
        with open(connector.decode.__path__[0] + "/" + name, encoding="utf-8") as fh:
            text += fh.read()
    defined = {m[1]: int(m[2], 0) for m in re.finditer(r"^#define (\w+) (0x[0-9A-Fa-f]+|\d+)u?$", text, re.M)}
    enum = re.search(r"enum bad_body \{([^}]*)\}", text)[1]
    defined.update({name: int(value) for name, value in re.findall(r"(\w+) = (\d+)", enum)})
    unsigned = {name: value & 0xFFFFFFFF for name, value in KERNEL_CONSTANTS.items()}  # C writes the magic unsigned
    assert {name: defined[name] for name in KERNEL_CONSTANTS} == unsigned
    # load_be32 reads TOTALSIZE and MAGICCODE as 4-byte big-endian ints
    assert layout.FIELDS_BY_NAME["TOTALSIZE"].width == layout.FIELDS_BY_NAME["MAGICCODE"].width == 4


@pytest.mark.parametrize("value, expected", [(None, "native"), ("0", "native"), ("1", "numpy")])
def test_the_kernels_are_chosen_once_at_import_and_the_environment_can_force_numpy(value, expected):
    env = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    if value is not None:
        env[PURE_PYTHON_ENV] = value
    out = subprocess.run([sys.executable, "-c", "from connector.decode import kernels; "
                          "print(kernels.active().name, kernels.native_kernel_available())"],
                         capture_output=True, text=True, timeout=60, check=True, env=env)
    assert out.stdout.split() == [expected, str(expected == "native")]


def test_libdeflate_is_used_where_the_system_has_it():
    expected = "libdeflate" if ctypes.util.find_library("deflate") else "zlib"
    assert kernel.INFLATER == expected


def test_zlib_and_libdeflate_inflate_the_fixture_to_the_same_columns(fixture_dir):
    default = _digest(fixture_dir)
    fallback = _digest(fixture_dir, HAREPLICA_NO_LIBDEFLATE="1")
    assert fallback[0] == "zlib" and int(fallback[1]) > 0
    assert default[1:] == fallback[1:]


def _gather(bodies: list[bytes], flags: list[int], first=0, decompress=True, max_bytes=0, crcs=None, max_inflated=0):
    data = b"".join(bodies)
    pos = np.cumsum([0] + [len(b) for b in bodies[:-1]]).astype(np.int64)
    end, offsets, values, bad = kernel.gather_bodies(
        data, pos, np.array([len(b) for b in bodies], np.int64), np.array(flags, np.int32), first, decompress,
        max_bytes, np.array(crcs or [], np.int32), crcs is not None, max_inflated)
    return end, offsets, values, np.frombuffer(bad, np.int32).reshape(-1, 2).tolist()


def test_gather_cuts_groups_at_max_bytes_but_takes_at_least_one_row():
    big = zlib.compress(b"x" * 100_000)
    end, offsets, values, bad = _gather([b"ab", big, b"cd"], [0, 0x301, 0], max_bytes=50_000)
    assert (end, bad, bytes(values)) == (1, [], b"ab")
    end, offsets, values, bad = _gather([b"ab", big, b"cd"], [0, 0x301, 0], first=1, max_bytes=50_000)
    assert (end, bad, len(values)) == (2, [], 100_000)  # alone in its group although past max_bytes
    assert np.frombuffer(offsets, np.int32).tolist() == [0, 100_000]
    end, offsets, values, bad = _gather([b"ab", big, b"cd"], [0, 0x301, 0])
    assert (end, bad, bytes(values)) == (3, [], b"ab" + b"x" * 100_000 + b"cd")


def test_gather_keeps_bad_bodies_as_stored_and_reports_row_and_code():
    broken = b"\x78\x9cbroken"
    end, offsets, values, bad = _gather([b"ab", zlib.compress(b"ok"), broken, b"cd"], [0, 1, 1, 0])
    assert (end, bad, bytes(values)) == (4, [[2, 2]], b"abok" + broken + b"cd")  # 2: does not inflate
    assert _gather([b"ab", zlib.compress(b"ok")], [0, 0x201])[3] == [[1, 3]]  # ZSTD type bits: not inflated here
    assert bytes(_gather([zlib.compress(b"ok")], [1], decompress=False)[2]) == zlib.compress(b"ok")


def test_gather_checks_bodycrc_masked_to_31_bits():
    bodies = [b"ab", b"cd", b""]
    crcs = [zlib.crc32(b"ab") & 0x7FFFFFFF, zlib.crc32(b"cd"), 0]  # the second is unmasked: a mismatch if bit 31 set
    end, _, values, bad = _gather(bodies, [0, 0, 0], crcs=crcs)
    assert bytes(values) == b"abcd"
    assert bad == ([[1, 1]] if zlib.crc32(b"cd") & 0x80000000 else [])
    assert _gather([b"ab"], [0], crcs=[12345])[3] == [[0, 1]]  # 1: BODYCRC mismatch


_BOMB = r"""
import zlib, numpy as np
from connector.decode import _decode_kernel as k
bomb, small = zlib.compress(bytes(1 << 20)), zlib.compress(b"x" * 1000)  # 1 MiB of zeros: ~1 KB stored
data = bomb + small
r = k.gather_bodies(data, np.array([0, len(bomb)], np.int64), np.array([len(bomb), len(small)], np.int64),
                    np.array([0x301, 0x301], np.int32), 0, True, 0, b"", False, 1000)
print(k.INFLATER, r[0], bytes(r[2]) == bomb + b"x" * 1000, np.frombuffer(r[3], np.int32).tolist())
"""


@pytest.mark.parametrize("env", [{}, {"HAREPLICA_NO_LIBDEFLATE": "1"}], ids=["default", "zlib"])
def test_gather_bounds_inflated_bodies_and_keeps_a_bomb_as_stored(env):
    out = subprocess.run([sys.executable, "-c", _BOMB], capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, **env}).stdout.split(maxsplit=3)
    assert out[0] == ("zlib" if env else kernel.INFLATER)
    # the bomb (code 4: inflates past max_inflated) is kept as stored; a body of exactly the bound inflates
    assert [out[1], out[2], out[3].strip()] == ["2", "True", "[0, 4]"]


def test_arguments_that_do_not_fit_are_value_errors():
    with pytest.raises(ValueError, match="lies outside"):
        kernel.gather_bodies(b"abc", np.array([2], np.int64), np.array([5], np.int64), np.zeros(1, np.int32), 0, 0, 0,
                             b"", False, 0)
    with pytest.raises(ValueError, match="one item per row"):
        kernel.gather_bodies(b"abc", np.array([0, 1], np.int64), np.array([1], np.int64), np.zeros(1, np.int32), 0, 0,
                             0, b"", False, 0)
    with pytest.raises(ValueError, match="one item per row"):
        kernel.gather_bodies(b"abc", np.array([0], np.int64), np.array([1], np.int64), np.zeros(1, np.int32), 0, 0,
                             0, b"", True, 0)
    with pytest.raises(ValueError, match="whole number of 8-byte items"):
        kernel.walk_records(b"abc", bytearray(12), bytearray(16))
    with pytest.raises(ValueError, match="lie outside"):
        kernel.split_properties(b"a\x01b", np.array([1], np.int64), np.array([3], np.int64), ())
    with pytest.raises(TypeError, match="must be bytes"):
        kernel.split_properties(b"a\x01b", np.array([0], np.int64), np.array([3], np.int64), ("TAGS",))


def test_split_properties_keeps_the_last_of_duplicate_names_and_finds_special_names():
    props = b"A\x01one\x02TAGS\x01t\x02A\x01two\x02\x01x\x02y\x01\x02KEYS\x01k1 k2\x02"
    moff, noff, names, voff, values, hits = kernel.split_properties(
        props, np.array([0], np.int64), np.array([len(props)], np.int64), (b"TAGS", b"KEYS", b"UNIQ_KEY"))
    cut = np.frombuffer(noff, np.int32).tolist()
    vcut = np.frombuffer(voff, np.int32).tolist()
    got = [(bytes(names[a:b]), bytes(values[c:d])) for a, b, c, d in zip(cut, cut[1:], vcut, vcut[1:], strict=False)]
    assert got == [(b"TAGS", b"t"), (b"A", b"two"), (b"KEYS", b"k1 k2")]
    assert np.frombuffer(moff, np.int32).tolist() == [0, 3]
    assert np.frombuffer(hits, np.int64).tolist() == [0, 2, -1]
