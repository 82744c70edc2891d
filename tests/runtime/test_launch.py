"""The launcher: results come back, and a rank that dies, fails, hangs or never arrives makes the whole
launch fail within the timeout, with a message that names it, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from fabriclab.runtime.environment import LaunchError
from fabriclab.runtime.launch import LaunchConfig, spawn

TIMEOUT_S = 3.0
HERE = Path(__file__).resolve().parent


def echo(ctx, extra):
    t = torch.full((3,), float(ctx.rank))
    dist.all_reduce(t, group=ctx.group)
    ctx.report(f"hello from {ctx.rank}")
    return (ctx.rank, ctx.world_size, t.tolist(), extra)


def misbehave(ctx, victim: int, how: str):
    """All ranks all-reduce in a loop; at step 3 the victim dies, exits, raises or hangs."""
    for i in range(200):
        ctx.mark(f"iteration {i}")
        if ctx.rank == victim and i == 3:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif how == "exit":
                os._exit(3)
            elif how == "raise":
                raise ValueError("boom")
            elif how == "hang":
                time.sleep(600)
        dist.all_reduce(torch.ones(1000), group=ctx.group)
        time.sleep(0.01)
    return "finished"


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc), except multiprocessing's helpers among its children
    (the forkserver and the resource tracker; the ranks are the forkserver's children)."""
    children: dict[int, list[tuple[int, bytes]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append((int(entry.name), cmdline))
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, cmdline in children.get(parent, []):
            todo.append(child)
            if not (parent == pid and (b"resource_tracker" in cmdline or b"forkserver import" in cmdline)):
                found.add(child)
    return found


def assert_no_ranks_left(before: set[int]) -> None:
    deadline = time.monotonic() + 3
    while (left := descendants(os.getpid()) - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}"


def sigint_as_default() -> None:
    """Ctrl-C reaches the child as a terminal's would, also when the suite itself runs in a shell's background
    (which starts it with SIGINT ignored, and a child inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_results_and_messages_come_back():
    messages = []
    results = spawn(echo, ("x",), config=LaunchConfig(num_ranks=3, timeout_s=30),
                    on_message=lambda rank, payload: messages.append((rank, payload)))
    assert results == {r: (r, 3, [3.0, 3.0, 3.0], "x") for r in range(3)}
    assert sorted(messages) == [(r, f"hello from {r}") for r in range(3)]


@pytest.mark.parametrize("how, expected", [
    ("kill", "rank 2 exited with code -9 (SIGKILL)"),
    ("exit", "rank 2 exited with code 3"),
    ("raise", "rank 2 failed at step 4 (iteration 3): ValueError: boom"),
    ("hang", "rank 2 is alive at step 4 (iteration 3) but never joined the collective"),
])
def test_a_failing_rank_is_named_and_the_rest_are_stopped(how, expected):
    before = descendants(os.getpid())
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        spawn(misbehave, (2, how), config=LaunchConfig(num_ranks=4, timeout_s=TIMEOUT_S))
    elapsed = time.monotonic() - start
    assert expected in str(info.value)
    assert 2 in info.value.ranks
    # Process start, the collective timeout, three heartbeats to tell the culprit, and slack for 2 cores.
    assert elapsed < 10 + TIMEOUT_S
    assert_no_ranks_left(before)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_ranks(ranks: list[int], world_size: int, how: str) -> list[subprocess.Popen]:
    """Start `ranks` of a torchrun-style launch of `world_size` by hand; they run `misbehave`."""
    port = free_port()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_launch as t; "
            "from fabriclab.runtime.environment import LaunchError, detect_launch\n"
            "from fabriclab.runtime.launch import LaunchConfig, join\n"
            "try:\n"
            f"    join(t.misbehave, (2, {how!r}), launch=detect_launch(),\n"
            f"         config=LaunchConfig(timeout_s={TIMEOUT_S}))\n"
            "except LaunchError as e:\n"
            "    print(e); sys.exit(1)\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI_", "SLURM_"))}
    return [subprocess.Popen([sys.executable, "-c", code, str(HERE)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True,
                             env={**clean, "RANK": str(r), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(r),
                                  "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                                  "TORCH_CPP_LOG_LEVEL": "FATAL"})
            for r in ranks]


def test_a_rank_that_never_arrives_is_named_by_the_others():
    procs = torchrun_ranks([0, 1], world_size=3, how="none")
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [1, 1]
    for out in outputs:
        assert f"rank 2 never arrived within {TIMEOUT_S:g} s" in out, out


def test_a_dead_peer_is_named_from_the_heartbeats_without_a_parent():
    procs = torchrun_ranks([0, 1, 2], world_size=3, how="kill")
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert procs[2].returncode == -signal.SIGKILL
    for out in outputs[:2]:
        assert "rank 2 stopped responding" in out, out


def test_ctrl_c_of_the_parent_stops_every_rank():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_launch as t\n"
            "from fabriclab.runtime.launch import LaunchConfig, spawn\n"
            "if __name__ == '__main__':\n"
            "    print('started', flush=True)\n"
            "    spawn(t.misbehave, (9, 'none'), config=LaunchConfig(num_ranks=3, timeout_s=30))\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(HERE)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True,
                              preexec_fn=sigint_as_default)
    assert parent.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 30
    while len(descendants(parent.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    ranks = descendants(parent.pid)
    assert len(ranks) == 3
    os.killpg(parent.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
    _, err = parent.communicate(timeout=20)
    assert "KeyboardInterrupt" in err
    time.sleep(0.5)
    assert not [pid for pid in ranks if Path(f"/proc/{pid}").exists()
                and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
