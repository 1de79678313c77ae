"""A broker killed while it creates a store file starts again (CI failure of 2026-11-26, issue 9).

The stub opened a new file under its store name and sized it afterwards; a kill -9 between the two left a
0-byte ConsumeQueue file, and the next start refused the store ("is 0 bytes but mappedFileSize... is 400").
The process below really dies (SIGKILL) at that point: the sizing call kills it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from broker_stub.store.mapped_file import MappedFileQueue

SIZE = 400  # bytes, a ConsumeQueue file of 20 entries

_CRASH = textwrap.dedent("""
    import os, signal, sys
    from broker_stub.store.mapped_file import MappedFileQueue
    queue = MappedFileQueue(sys.argv[1], {size}, preallocate=False)
    queue.create_next_file()
    os.ftruncate = lambda fd, length: os.kill(os.getpid(), signal.SIGKILL)
    queue.create_next_file()
""").format(size=SIZE)


def test_kill_while_sizing_a_new_file_leaves_a_store_that_loads(tmp_path):
    folder = tmp_path / "consumequeue" / "TopicA" / "0"
    done = subprocess.run([sys.executable, "-c", _CRASH, str(folder)], cwd=os.getcwd(), timeout=60)
    assert done.returncode == -signal.SIGKILL
    queue = MappedFileQueue(folder, SIZE, preallocate=False, kind="ConsumeQueue")
    queue.load()  # before the fix: ValueError "... 00000000000000000400 is 0 bytes ..."
    assert [f.file_name for f in queue.files] == [f"{0:020d}"]
    assert sorted(p.name for p in folder.iterdir()) == [f"{0:020d}"]  # the half-made file is gone
    queue.create_next_file()  # and the next file can be made where it failed
    assert (folder / f"{SIZE:020d}").stat().st_size == SIZE
    queue.close()


def test_a_wrong_sized_consume_queue_file_is_named_as_one(tmp_path):
    folder = tmp_path / "TopicA" / "0"
    folder.mkdir(parents=True)
    (folder / f"{0:020d}").write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match=r"ConsumeQueue file .*00000000000000000000 is 100 bytes but "
                                         r"mappedFileSizeConsumeQueue is 400"):
        MappedFileQueue(folder, SIZE, preallocate=False, kind="ConsumeQueue").load()
