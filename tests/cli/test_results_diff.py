"""`fabriclab results diff` of two records of different kinds: one `error:` line naming both kinds (exit 2),
unless `--any-kind` asks for the key-by-key listing anyway."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fabriclab.record import make_record
from fabriclab.report import store


@pytest.fixture
def two_kinds(tmp_path):
    path = tmp_path / "results.db"
    rows = [{"model": "resnet50", "workers": w, "scaling_factor": f} for w, f in ((16, 0.9), (32, 0.8))]
    store.add_record(make_record("whatif", {"workers": "16,32"}, {"rows": rows}), path)
    store.add_record(make_record("simulate.collective", {"algo": "ring", "hosts": 8},
                                 {"rows": [{"algo": "ring", "time_s": 0.01, "busbw_GBps": 3.1}]}), path)
    store.add_record(make_record("whatif", {"workers": "16,32"}, {"rows": rows[:1]}), path)
    return path


def diff(path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "fabriclab", "results", "diff", *args, "--store", str(path),
                           "--format", "plain"], capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)


def test_records_of_different_kinds_are_refused_with_one_line(two_kinds):
    done = diff(two_kinds, "1", "2")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "'whatif'" in lines[0] and "'simulate.collective'" in lines[0] and "--any-kind" in lines[0]
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_any_kind_lists_the_keys_as_before(two_kinds):
    done = diff(two_kinds, "1", "2", "--any-kind")
    assert done.returncode == 0, done.stderr
    assert "kind" in done.stdout and "simulate.collective" in done.stdout
    assert "config.algo" in done.stdout and "config.workers" in done.stdout


def test_records_of_one_kind_need_no_flag(two_kinds):
    done = diff(two_kinds, "1", "3")
    assert done.returncode == 0, done.stderr
    assert "results.rows[model=resnet50,workers=32]" in done.stdout and "simulate" not in done.stdout
