"""The start of a ``python -c`` script that refuses every import of pandas and records where it was attempted.

The workers' read path must never import pandas (docs/source.md, "No pandas in the workers"): pyarrow's pandas
shim would import it on the first ``pa.array`` of Python values and keep that answer for the process. A test
script starts with :func:`refuse_pandas_prelude`, then does its work and prints ``attempts``: the last stack line
of each attempt whose file path contains ``marker`` ("?" when none does).
"""

from __future__ import annotations


def refuse_pandas_prelude(marker: str) -> str:
    """Python source that installs the refusing import hook; ``attempts`` is the list it fills."""
    return f"""
import json, sys, traceback
attempts = []

class RefusePandas:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            ours = [line.strip() for line in traceback.format_stack() if {marker!r} in line]
            attempts.append(ours[-1] if ours else "?")
            raise ImportError("pandas refused by the test")
        return None

sys.meta_path.insert(0, RefusePandas())
"""
