"""Tests of run records: contents, JSON and CSV output, git facts, and that torch is never imported."""

import csv
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fabriclab
from fabriclab.record import git_revision, host_facts, make_record, versions, write_csv, write_record


@dataclasses.dataclass(frozen=True, kw_only=True)
class Point:
    size_bytes: int
    time_s: float


def test_record_has_config_results_versions_git_and_host():
    config = {"ranks": 4, "path": Path("/tmp/x")}
    record = make_record("collectives.bench", config, [Point(size_bytes=4, time_s=1e-6)])
    assert record["kind"] == "collectives.bench"
    assert record["config"] == {"ranks": 4, "path": "/tmp/x"}
    assert record["results"] == [{"size_bytes": 4, "time_s": 1e-6}]
    assert record["versions"]["fabriclab"] == fabriclab.__version__
    assert record["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert record["versions"]["numpy"] == np.__version__
    assert record["created_utc"].endswith("+00:00")
    host = record["host"]
    assert host["hostname"] and host["os"]
    assert host["num_cpus"] >= 1 and 1 <= host["num_cpus_usable"] <= host["num_cpus"]
    assert host["memory_bytes"] is None or host["memory_bytes"] > 2**20
    assert record["git"] is None or set(record["git"]) == {"revision", "dirty"}
    json.dumps(record)


def test_record_needs_a_kind():
    with pytest.raises(ValueError, match="needs a kind"):
        make_record("", {}, None)


def test_write_record_round_trips_numpy_and_makes_folders(tmp_path):
    path = tmp_path / "deep" / "run.json"
    record = make_record("test", {"sizes": (1, 2)}, {"busbw_Bps": np.float64(2.5), "times_s": np.arange(3)})
    assert write_record(path, record) == path
    loaded = json.loads(path.read_text())
    assert loaded["results"] == {"busbw_Bps": 2.5, "times_s": [0, 1, 2]}
    assert loaded["config"] == {"sizes": [1, 2]}


def test_write_csv_uses_every_key_in_first_seen_order(tmp_path):
    path = write_csv(tmp_path / "out" / "rows.csv", [{"size_bytes": 4, "time_s": 0.5},
                                                     {"size_bytes": 8, "busbw_Bps": np.float32(3.0)}])
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["size_bytes", "time_s", "busbw_Bps"]
    assert rows == [{"size_bytes": "4", "time_s": "0.5", "busbw_Bps": ""},
                    {"size_bytes": "8", "time_s": "", "busbw_Bps": "3.0"}]


def test_write_csv_of_no_rows_writes_an_empty_file(tmp_path):
    assert write_csv(tmp_path / "empty.csv", []).read_text().strip() == ""


def test_host_facts_names_the_cpu():
    facts = host_facts()
    assert set(facts) >= {"hostname", "os", "cpu_model", "num_cpus", "memory_bytes"}


def test_git_revision_is_none_outside_a_checkout(tmp_path):
    assert git_revision(tmp_path) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_revision_and_dirty_flag(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("1")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    clean = git_revision(tmp_path)
    assert clean is not None and len(clean["revision"]) == 40 and clean["dirty"] is False
    (tmp_path / "a.txt").write_text("2")
    assert git_revision(tmp_path) == {"revision": clean["revision"], "dirty": True}


def test_versions_do_not_import_torch():
    code = ("import sys, fabriclab.record as r; v = r.versions(); r.make_record('x', {}, None); "
            "assert 'torch' not in sys.modules, 'record imported torch'; print(v['torch'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if sys.modules.get("torch") is not None:
        assert versions()["torch"] == sys.modules["torch"].__version__
