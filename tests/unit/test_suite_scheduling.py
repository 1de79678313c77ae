"""How ``make test`` hands its groups to the two workers (tests/conftest.py; CONTRIBUTING.md "How the suite is
grouped"): tests/cluster and tests/compat as one group, every other module as its own, the longest expected
first by tests/scope_seconds.json; and the run that records that file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    RECORD_SCOPE_SECONDS_ENV,
    SCOPE_SECONDS_FILE,
    UNLISTED_SECONDS_PER_TEST,
    UNLISTED_UNIT_SECONDS_PER_TEST,
    expected_seconds,
    longest_first,
    scope_of,
    scope_seconds,
)

CHECKOUT = Path(__file__).resolve().parents[2]


def test_cluster_and_compat_are_one_group_and_every_other_module_its_own():
    assert scope_of("tests/cluster/test_bronze_on_cluster.py::test_a") == "packaging"
    assert scope_of("tests/compat/test_spark_versions.py::test_b[spark-4.0]") == "packaging"
    assert scope_of("tests/faults/test_delta_crash.py::test_c[spark]") == "tests/faults/test_delta_crash.py"
    assert scope_of("tests/unit/test_x.py::TestY::test_z") == "tests/unit/test_x.py"


def test_the_longest_group_goes_first_and_unlisted_ones_are_guessed_per_test():
    table = {"tests/faults/test_slow.py": 300.0, "packaging": 900.0}
    groups = {"tests/unit/test_many.py": 100, "tests/faults/test_slow.py": 2, "packaging": 20,
              "tests/integration/test_new.py": 3, "tests/unit/test_few.py": 3}
    assert longest_first(groups, table) == ["packaging", "tests/faults/test_slow.py", "tests/integration/test_new.py",
                                            "tests/unit/test_many.py", "tests/unit/test_few.py"]
    assert expected_seconds("tests/integration/test_new.py", 3, table) == 3 * UNLISTED_SECONDS_PER_TEST
    assert expected_seconds("tests/unit/test_many.py", 100, table) == 100 * UNLISTED_UNIT_SECONDS_PER_TEST
    # equal figures keep the collection's order
    assert longest_first({"tests/a.py": 1, "tests/b.py": 1}, {}) == ["tests/a.py", "tests/b.py"]


def test_the_committed_table_names_only_groups_that_exist():
    table = scope_seconds()
    assert table["packaging"] == max(table.values()), "the cluster and compat group is the longest"
    missing = [scope for scope in table if scope != "packaging" and not (CHECKOUT / scope).is_file()]
    assert not missing, f"{SCOPE_SECONDS_FILE.name} names modules that are gone: {missing}"


def test_a_table_that_is_not_an_object_of_numbers_is_refused_naming_the_file(tmp_path):
    bad = tmp_path / "scope_seconds.json"
    bad.write_text(json.dumps({"tests/unit/test_x.py": "slow"}))
    with pytest.raises(pytest.UsageError, match=f"{bad}: not an object of numbers"):
        scope_seconds(bad)
    bad.write_text("{")
    with pytest.raises(pytest.UsageError, match=str(bad)):
        scope_seconds(bad)
    assert scope_seconds(tmp_path / "none.json") == {}


def test_a_run_with_the_record_variable_writes_its_test_seconds_per_group(tmp_path):
    out = tmp_path / "recorded.json"
    module = "tests/unit/broker_stub/test_logs.py"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", module], cwd=CHECKOUT,
                          env={**os.environ, RECORD_SCOPE_SECONDS_ENV: str(out)}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    recorded = json.loads(out.read_text())
    assert list(recorded) == [module] and recorded[module] >= 0
