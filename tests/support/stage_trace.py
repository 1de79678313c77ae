"""Trace which of the task's read modules control passes through while a consumer pulls batches (issue 54).

:class:`StageTrace` runs ``sys.setprofile`` on the consumer's thread only (a prefetch thread is not traced) while
each ``next()`` of a batch iterator runs, one *window* per batch (the last window is the one that ends the
iteration: finish and teardown). Every Python frame is attributed to its innermost enclosing frame whose file is
one of the traced modules (stdlib, numpy, pyarrow and untraced connector modules are transparent), so a call
from ``connector/decode/stream.py`` into ``connector/decode/kernels.py`` stays "in stream.py". Control moves
between modules two ways: a call (or a generator's resumption) *enters* the callee's module; a return (or a
yield) *leaves* a module for its caller. Per window it counts, for each traced module, how many times control
entered it from another module (``entries``), how many of those entries were *returns to a module already
left* in the window (``returns``: a module that had returned or yielded, entered again), and each
``(from, to)`` hand-over either way (from or to None: the consumer).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: the task's read, as module path suffixes (``/``-separated) -> short names
READ_MODULES = {
    "connector/source/task/read.py": "read.py",
    "connector/client/ha.py": "ha.py",
    "connector/decode/stream.py": "stream.py",
    "connector/decode/columns.py": "columns.py",
}


@dataclass
class Window:
    """What one ``next()`` did: ``entries[module]`` (calls and resumptions from another module), ``returns``
    (entries into a module that had returned or yielded earlier in the window, counted per module in
    ``returned_to``) and ``handovers[(from, to)]`` (entries and leaves)."""

    entries: Counter = field(default_factory=Counter)
    returns: int = 0
    returned_to: Counter = field(default_factory=Counter)
    handovers: Counter = field(default_factory=Counter)
    left: set = field(default_factory=set)


class StageTrace:
    """Pull every item of an iterator under a profiler, one :class:`Window` per ``next()``; ``modules`` maps a
    path suffix to the name reported (default :data:`READ_MODULES`)."""

    def __init__(self, modules: dict[str, str] | None = None):
        self.modules = READ_MODULES if modules is None else modules
        self.windows: list[Window] = []
        self._names: dict[object, str | None] = {}  # code object -> module name or None (untraced)
        self._window = Window()
        self._current: str | None = None

    def drain(self, items: Iterable) -> list:
        """Every item of ``items``, each pulled inside its own traced window (plus one for the final ``next``)."""
        it = iter(items)
        out = []
        while True:
            self._window, self._current = Window(), None
            sys.setprofile(self._event)
            try:
                item = next(it)
            except StopIteration:
                item = _END
            finally:
                sys.setprofile(None)
                self.windows.append(self._window)
            if item is _END:
                return out
            out.append(item)

    def totals(self) -> Window:
        """Every window's counts summed."""
        total = Window()
        for w in self.windows:
            total.entries.update(w.entries)
            total.returns += w.returns
            total.returned_to.update(w.returned_to)
            total.handovers.update(w.handovers)
        return total

    # --- profiler -----------------------------------------------------------------------------------
    def _name(self, code) -> str | None:
        try:
            return self._names[code]
        except KeyError:
            path = Path(code.co_filename).as_posix()
            name = next((n for suffix, n in self.modules.items() if path.endswith("/" + suffix)), None)
            self._names[code] = name
            return name

    def _module_of(self, frame) -> str | None:
        while frame is not None:
            name = self._name(frame.f_code)
            if name is not None:
                return name
            frame = frame.f_back
        return None

    def _event(self, frame, event: str, _arg) -> None:
        if event == "call":
            module = self._module_of(frame)
        elif event == "return":
            module = self._module_of(frame.f_back)
        else:
            return  # c_call / c_return: C code runs in its caller's module
        if module == self._current:
            return
        w = self._window
        w.handovers[(self._current, module)] += 1
        if event == "return":
            w.left.add(self._current)
        elif module is not None:
            w.entries[module] += 1
            if module in w.left:
                w.returns += 1
                w.returned_to[module] += 1
        self._current = module


_END = object()
