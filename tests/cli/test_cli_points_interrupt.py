"""Ctrl-C in the middle of a plan on local processes: the store keeps every finished point and nothing
else, the message says to resume, and `--resume` finishes with the answer of an uninterrupted run
(report/points)."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import fabriclab
from tests.runtime.test_launch import sigint_as_default  # Ctrl-C as a terminal sends it

SRC = Path(fabriclab.__file__).resolve().parent.parent
ARGS = ["plan", "--model", "resnet50", "--gpus", "512,1024,2048", "--fabrics",
        "25gbe,100g-opa,100gbe,200g-hdr,400g-ndr", "--bisection", "1,1/2,1/4"]
TOTAL = 15  # 3 GPU counts x 5 fabrics, about a second each (fat trees of 256 .. 1,024 servers)


def fabriclab_cmd(*args: str, store: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "80"}
    return subprocess.Popen([sys.executable, "-m", "fabriclab", *ARGS, "--store", str(store), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def stored(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=10) as conn:
            return conn.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not made yet
        return 0


def answer(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.endswith(" s")]


def test_ctrl_c_keeps_the_finished_points_and_resume_gives_the_uninterrupted_answer(tmp_path):
    store = tmp_path / "r.db"
    proc = fabriclab_cmd("--processes", "2", store=store, start_new_session=True, preexec_fn=sigint_as_default)
    try:
        deadline = time.monotonic() + 120
        while stored(store) == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group, pool processes included
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    kept = stored(store)
    assert proc.returncode != 0 and 0 < kept < TOTAL, (proc.returncode, kept, err[-2000:])
    assert "run the same command with --resume" in err and "Traceback" not in err
    resumed = fabriclab_cmd("--resume", store=store)
    fresh = fabriclab_cmd(store=tmp_path / "fresh.db")
    (r_out, r_err), (f_out, _) = resumed.communicate(timeout=300), fresh.communicate(timeout=300)
    assert resumed.returncode == fresh.returncode == 0, r_err
    assert f"({kept} from the store, {TOTAL - kept} run now)" in r_err
    assert answer(r_out) == answer(f_out) and len(answer(f_out)) > 10
    assert stored(store) == TOTAL
