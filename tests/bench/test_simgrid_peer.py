"""SimGrid beside fabriclab: the peer program gives our answers, and `bench sim --peer simgrid` times both.

The tests marked `simgrid` need Debian's libsimgrid-dev, g++ and pkg-config (`.ci/run` installs them)."""

import sys
from fractions import Fraction

import pytest

from fabriclab.bench.speed import sim, simgrid_peer
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.sim.collective import simulate

VERSION = simgrid_peer.simgrid_version()
needs_simgrid = pytest.mark.skipif(VERSION is None, reason=f"SimGrid is not installed: {simgrid_peer.INSTALL_HINT}")


def test_a_whole_process_reports_its_own_peak_memory_and_is_stopped_at_its_timeout():
    big = bytearray(200 * 2**20)  # this process is large; the child's peak must not include it
    small = simgrid_peer.whole_process(["/bin/true"], 10)
    assert small["returncode"] == 0 and not small["timed_out"] and small["peak_MiB"] < 40 and big
    grows = simgrid_peer.whole_process([sys.executable, "-S", "-c", "x = bytearray(120 * 2**20); print('ok')"], 10)
    assert grows["stdout"].strip() == "ok" and 120 < grows["peak_MiB"] < 200
    stopped = simgrid_peer.whole_process(["/bin/sleep", "5"], 0.3)
    assert stopped["timed_out"] and stopped["wall_s"] < 4


def test_every_peer_case_names_a_schedule_the_peer_knows():
    known = ("ring", "butterfly-near", "butterfly-far", "recursive-doubling", "direct")
    assert all(c.peer_algo in known or c.peer_algo.startswith("ps:") for c in sim.CASES)
    assert {c.hosts for c in sim.CASES if c.name in sim.PEER_CASES} == {2048, 16384}


@pytest.mark.simgrid
@needs_simgrid
@pytest.mark.parametrize("hosts, levels, per_leaf", [(48, 2, 16), (20, 2, 4), (64, 3, 4)])
def test_simgrid_gives_the_general_engines_answer(tmp_path, hosts, levels, per_leaf):
    spec = TopologySpec(kind="fat-tree", hosts=hosts, levels=levels, hosts_per_leaf=per_leaf,
                        leaves_per_pod=4 if levels == 3 else None, bisection=Fraction(1, 4), bandwidth_Bps=4e9,
                        latency_s=0.2e-6)
    topo = build_topology(spec)
    platform = simgrid_peer.platform_file(spec, f"test-{hosts}-{levels}")
    binary = simgrid_peer.peer_binary(VERSION)
    size = 3 * 2**20 + 12  # blocks of unequal size
    for ours, theirs in [("ring", "ring"), ("butterfly", "butterfly-near"), ("butterfly:order=far", "butterfly-far"),
                         ("recursive-doubling", "recursive-doubling"), ("ps:servers=3", "ps:3"), ("direct", "direct")]:
        want = simulate("allreduce", ours, topo, hosts, size, engine="general").time_s
        run = simgrid_peer.whole_process(simgrid_peer.simgrid_argv(binary, platform, theirs, hosts, size), 60)
        assert run["returncode"] == 0, run["stderr"]
        got = float(run["stdout"].split()[-1])
        assert got == pytest.approx(want, rel=1e-9, abs=0), ours


@pytest.mark.simgrid
@needs_simgrid
def test_a_case_runs_beside_simgrid():
    row = simgrid_peer.beside(next(c for c in sim.CASES if c.name == "ring-256"), runs=1, timeout_s=120,
                              binary=simgrid_peer.peer_binary(VERSION))
    sg = row["simgrid"]
    assert sg["agrees"] and not sg["timed_out"] and sg["runs"] == 1
    assert row["wall_s"] > 0 and sg["wall_s"] > 0 and sg["ratio"] == pytest.approx(sg["wall_s"] / row["wall_s"])
    assert row["peak_MiB"] > 10 and sg["peak_MiB"] > 10


def test_the_notes_give_the_rings_growth_and_the_goals():
    def row(case, wall, sg_wall, ratio_goal, timed_out=False):
        sg = {"timed_out": timed_out, "meets_goal": sg_wall / wall >= ratio_goal, "memory_ok": True}
        return {"case": case, "wall_s": wall, "simgrid": sg}

    notes = simgrid_peer.notes([row("ring-2048", 0.5, 30.0, 1), row("ring-16384", 6.0, 50.0, 10, timed_out=True)],
                               120)
    assert notes[0].startswith("ring-16384 / ring-2048 (8x the hosts): 12.0x")
    assert any("stopped after 120 s" in n for n in notes) and notes[-1] == "goal missed on ring-16384"
