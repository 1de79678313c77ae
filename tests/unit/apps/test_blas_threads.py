"""streaming_apps.blas_threads: one OpenBLAS thread in the project's processes, unless the user chose a count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streaming_apps import blas_threads
from streaming_apps.blas_threads import BLAS_THREAD_VARIABLES, OPENBLAS_THREADS_VARIABLE, single_blas_thread


def test_sets_one_thread_when_nothing_is_chosen():
    environ = {"PATH": "/bin"}
    assert single_blas_thread(environ) is True
    assert environ == {"PATH": "/bin", OPENBLAS_THREADS_VARIABLE: "1"}


@pytest.mark.parametrize("name", BLAS_THREAD_VARIABLES)
def test_a_users_choice_stands(name):
    environ = {name: "4"}
    assert single_blas_thread(environ) is False
    assert environ == {name: "4"}


def _threads_after_importing_numpy(call: bool) -> int:
    """Threads of a fresh interpreter, without any BLAS variable, after (optionally) the call and numpy's import."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import streaming_apps.blas_threads as b; "
            f"{'b.single_blas_thread(); ' if call else ''}import numpy; print(len(os.listdir('/proc/self/task')))")
    root = os.path.dirname(os.path.dirname(blas_threads.__file__))
    out = subprocess.run([sys.executable, "-c", code, root], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_numpy_starts_no_blas_thread_after_the_call():
    without = _threads_after_importing_numpy(call=False)
    if (os.cpu_count() or 1) > 1:  # OpenBLAS's pool: one thread per core but one (none on a machine of one core)
        assert without > 1
    assert _threads_after_importing_numpy(call=True) == 1
