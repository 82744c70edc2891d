"""Root tests of `emu.launch` on a star of 3 hosts: the rendezvous environment in each namespace, ranks
reaching MASTER_ADDR, a failing rank named and the others stopped, the timeout, and Ctrl-C."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from fabriclab.emu import netns
from fabriclab.emu.cluster import EmuConfig, emulated_cluster
from fabriclab.emu.launch import exit_code, first_failure, run_in_cluster
from fabriclab.emu.state import state_path
from fabriclab.fabric.scenario import TopologySpec

pytestmark = pytest.mark.root

PRINT_ENV = ("import os; print(*(f'{k}={os.environ[k]}' for k in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', "
             "'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'FABRICLAB_EMU_DILATION')))")
RENDEZVOUS = """
import os, socket
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
if rank == 0:
    server = socket.create_server(addr)
    print("ranks", sorted(int(server.accept()[0].recv(16)) for _ in range(size - 1)))
else:
    for _ in range(100):
        try:
            socket.create_connection(addr).sendall(str(rank).encode())
            break
        except ConnectionRefusedError:
            __import__("time").sleep(0.05)
"""


@pytest.fixture(scope="module")
def star3(emu_root):
    spec = TopologySpec(kind="star", hosts=3, bandwidth_Bps=400e6 / 8)
    # At the state file `emu up` writes, as `run_in_cluster` reads it without a state (as `emu run` does).
    with emulated_cluster(spec, config=EmuConfig(dilation=4, measure_rtt=False), state_file=state_path()) as state:
        yield state


def test_every_rank_gets_the_rendezvous_environment_in_its_namespace(star3):
    lines = []
    results = run_in_cluster([sys.executable, "-c", PRINT_ENV], timeout_s=30, master_port=29600,
                             on_line=lambda rank, line: lines.append((rank, line)))
    assert [r.status for r in results] == ["ok"] * 3 and exit_code(results) == 0
    for r in results:
        assert r.output == (f"RANK={r.rank} WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=10.77.0.1 "
                            f"MASTER_PORT=29600 FABRICLAB_EMU_DILATION=4")
    assert sorted(lines) == [(r.rank, r.output) for r in results]
    inside = run_in_cluster(["ip", "-o", "-4", "addr", "show", "scope", "global"], timeout_s=30)
    assert [f"inet 10.77.0.{rank + 1}/32" in r.output for rank, r in enumerate(inside)] == [True] * 3


def test_ranks_reach_master_addr_across_the_fabric(star3):
    results = run_in_cluster([sys.executable, "-c", RENDEZVOUS], timeout_s=30)
    assert exit_code(results) == 0, [r.output for r in results]
    assert results[0].output.strip() == "ranks [1, 2]"


def test_a_failing_rank_is_named_and_the_others_are_stopped(star3):
    code = "import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.2 if r == 1 else 60); sys.exit(7)"
    start = time.monotonic()
    results = run_in_cluster([sys.executable, "-c", code], timeout_s=60)
    assert time.monotonic() - start < 15
    bad = first_failure(results)
    assert (bad.rank, bad.returncode, bad.status) == (1, 7, "failed") and exit_code(results) == 7
    assert [r.status for r in results] == ["killed", "failed", "killed"]
    assert all(netns.netns_pids(name) == [] for name in star3.namespaces)


def test_timeout_stops_every_rank(star3):
    results = run_in_cluster(["sleep", "60"], timeout_s=0.5)
    assert [r.status for r in results] == ["timeout"] * 3 and exit_code(results) == 124


def test_ctrl_c_kills_every_rank(star3):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_in_cluster(["sleep", "60"], timeout_s=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert all(netns.netns_pids(name) == [] for name in star3.namespaces)


def test_run_needs_a_command_and_a_cluster(star3):
    with pytest.raises(ValueError, match="after `--`"):
        run_in_cluster([])
    with pytest.raises(ValueError, match="positive"):
        run_in_cluster(["true"], timeout_s=0)
