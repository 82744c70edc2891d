"""SIGTERM to a running command, as `kill PID` sends it to the CLI's process alone: handled like Ctrl-C
(cli/signals.py). The finished work stays stored, every child process ends (pool workers, forkserver, resource
tracker, ranks), stderr has one `error:` line and no traceback, and the exit code is Ctrl-C's, 130."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fabriclab
from fabriclab.cli.signals import Terminated, sigterm_as_interrupt

SRC = Path(fabriclab.__file__).resolve().parent.parent
PLAN = ["plan", "--model", "resnet50", "--gpus", "512,1024,2048", "--fabrics",
        "25gbe,100g-opa,100gbe,200g-hdr,400g-ndr", "--bisection", "1,1/2,1/4", "--processes", "2"]
TRAIN = ["train", "--model", "googlenet", "--image-size", "32", "--np", "2", "--batch-size", "4", "--steps", "1000",
         "--warmup", "1", "--no-baseline", "--timeout", "60"]


def start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    """The command in a session of its own, so that its process group is exactly it and its children."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "80", "FABRICLAB_STORE": str(tmp_path / "store.db")}
    return subprocess.Popen([sys.executable, "-m", "fabriclab", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # ended while we looked
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def stored_points(store: Path) -> int:
    try:
        with sqlite3.connect(store, timeout=10) as conn:
            return conn.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    except sqlite3.OperationalError:  # no store, or no table yet
        return 0


def terminate_when(proc: subprocess.Popen, ready, limit_s: float = 120) -> tuple[str, str, list[int]]:
    """SIGTERM the command's process (only it) once `ready()`; its output, and its group left 5 s later."""
    try:
        deadline = time.monotonic() + limit_s
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, f"the command ended before it was ready: {proc.communicate()}"
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 5
        while group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        return out, err, group(proc.pid)
    finally:  # whatever the test found, nothing of it outlives the test
        if proc.poll() is None or group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def assert_one_error_line(err: str, code: int) -> None:
    assert code == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == ["error: terminated (SIGTERM)"], err[-3000:]


def test_sigterm_raises_terminated_inside_the_block_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt) as caught:
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs here, between two bytecodes
    assert isinstance(caught.value, Terminated)
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.timeout(300)
def test_sigterm_to_plan_on_local_processes_keeps_the_points_and_ends_every_process(tmp_path):
    store = tmp_path / "r.db"
    proc = start([*PLAN, "--store", str(store)], tmp_path)
    out, err, left = terminate_when(proc, lambda: stored_points(store) > 0)
    assert_one_error_line(err, proc.returncode)
    assert not left, f"processes left running: {left}"
    assert 0 < stored_points(store) < 15 and "run the same command with --resume" in err


@pytest.mark.timeout(300)
def test_sigterm_to_train_on_two_ranks_ends_the_ranks_with_one_line(tmp_path):
    # main, resource tracker, forkserver and two ranks; then a moment for the ranks to be in their steps
    seen: list[float] = []

    def training() -> bool:
        if len(group(proc.pid)) >= 5 and not seen:
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] > 3

    proc = start(TRAIN, tmp_path)
    out, err, left = terminate_when(proc, training)
    assert_one_error_line(err, proc.returncode)
    assert not left, f"processes left running: {left}"


_CLUSTER_UNDER_THE_CLI = """
import time
from fabriclab.cli.signals import sigterm_as_interrupt
from fabriclab.emu.cluster import emulated_cluster
from fabriclab.fabric.scenario import TopologySpec
with sigterm_as_interrupt():
    try:
        with emulated_cluster(TopologySpec(kind="star", hosts=2, bandwidth_Bps=200e6 / 8)):
            print("up", flush=True)
            time.sleep(60)
    except KeyboardInterrupt as exc:
        print(type(exc).__name__, flush=True)
"""


@pytest.mark.root
def test_sigterm_while_an_emulated_cluster_is_up_is_ctrl_c_and_the_cluster_goes(emu_root):
    # `validate emulated`, `stencil scale`, `bench fabrics`: the cluster's own SIGTERM handler gives way to the
    # CLI's, so SIGTERM ends them as Ctrl-C does (one line, 130), after the same teardown.
    from fabriclab.emu import netns
    from fabriclab.emu.state import name_tag, private_state_path

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", _CLUSTER_UNDER_THE_CLI], stdout=subprocess.PIPE, text=True, env=env)
    tag = name_tag(private_state_path(proc.pid))
    try:
        assert proc.stdout.readline().strip() == "up"
        assert len(netns.our_namespaces(tag)) == 3
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0 and out.strip() == "Terminated"
    assert netns.our_namespaces(tag) == []
