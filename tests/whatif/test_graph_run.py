"""Imported rank graphs on a cluster: each comm op costs what the cluster's library model predicts, and the
step, compute and exposed communication follow the critical path (checked against closed forms)."""

from __future__ import annotations

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl import predict
from fabriclab.nccl.predict import collective_times
from fabriclab.whatif import graph_run
from fabriclab.whatif.graph_run import rank_time, run_graphs, sample_graphs, schedule
from fabriclab.workload.graph import Op, RankGraph


@pytest.fixture(scope="module")
def h100():
    return cluster_preset("dgx-h100")


def model(cluster, n, size, collective):
    return float(collective_times(cluster, n, [size], collective)[0][0])


def comm(i, collective="allreduce", size=1 << 20, n=8, deps=(), **kw):
    return Op(id=i, name=f"c{i}", kind="comm", collective=collective, communicator=kw.pop("communicator", "dp"),
              size_bytes=size, group_size=n, deps=deps, **{"stream": "comm", **kw})


def compute(i, seconds, deps=()):
    return Op(id=i, name=f"k{i}", kind="compute", duration_s=seconds, flops=1e12, deps=deps)


def test_every_comm_op_of_the_sample_costs_what_the_library_model_says(h100):
    graphs = sample_graphs()
    result = run_graphs(graphs, h100)
    assert result.num_costed == sum(op.kind == "comm" for g in graphs for op in g.ops)
    for graph in result.graphs:
        for op in graph.ops:
            if op.kind != "comm":
                continue
            if op.collective in ("send", "recv"):  # ranks 0 and 2 share a server of 8: NCCL's sendrecv on 2
                assert op.duration_s == model(h100, 2, op.size_bytes, "sendrecv")
            elif op.collective == "barrier":
                assert op.duration_s == model(h100, 4, 4, "allreduce")
            else:
                assert op.duration_s == model(h100, op.group_size, op.size_bytes, op.collective)
    assert result.step_s == max(g.critical_path_s() for g in result.graphs)
    assert [r.step_s for r in result.ranks] == [g.critical_path_s() for g in result.graphs]
    assert set(result.comm_s) == {"tp", "pp", "world"}


def test_a_step_without_overlap_is_compute_plus_communication(h100):
    t = model(h100, 16, 64 << 20, "allreduce")
    graph = RankGraph(rank=0, num_ranks=16, ops=(compute(0, 1e-3), comm(1, size=64 << 20, n=16, deps=(0,)),
                                                 compute(2, 2e-3, deps=(1,))))
    result = run_graphs([graph], h100)
    assert result.step_s == pytest.approx(3e-3 + t, rel=1e-12)
    assert result.compute_s == pytest.approx(3e-3) and result.exposed_comm_s == pytest.approx(t, rel=1e-9)
    assert result.comm_s == {"dp": t} and result.slowest_rank == 0


def test_communication_beside_compute_is_exposed_only_beyond_it(h100):
    t = model(h100, 16, 256 << 20, "allreduce")
    long = RankGraph(rank=0, num_ranks=16, ops=(compute(0, 1e-3), comm(1, size=256 << 20, n=16, deps=(0,)),
                                                compute(2, 10 * t, deps=(0,))))
    r = run_graphs([long], h100)
    assert r.step_s == pytest.approx(1e-3 + 10 * t) and r.exposed_comm_s == pytest.approx(0.0, abs=1e-15)
    short = RankGraph(rank=0, num_ranks=16, ops=(compute(0, 1e-3), comm(1, size=256 << 20, n=16, deps=(0,)),
                                                 compute(2, t / 4, deps=(0,))))
    r = run_graphs([short], h100)
    assert r.step_s == pytest.approx(1e-3 + t) and r.exposed_comm_s == pytest.approx(0.75 * t, rel=1e-9)


def test_trivial_communication_costs_nothing_and_measured_times_stay(h100):
    ops = (comm(0, n=1), comm(1, size=0, n=8), comm(2, n=8, duration_s=5e-3, deps=(1,)))
    graph = RankGraph(rank=0, num_ranks=8, ops=ops)
    result = run_graphs([graph], h100)
    assert [op.duration_s for op in result.graphs[0].ops] == [0.0, 0.0, 5e-3]
    recosted = run_graphs([graph], h100, recost=True)
    assert recosted.graphs[0].ops[2].duration_s == model(h100, 8, 1 << 20, "allreduce")


def test_group_sizes_come_from_the_op_its_communicator_or_the_job(h100):
    ops = (comm(0, n=0, communicator="tp"), comm(1, n=0, communicator="dp", size=2 << 20),
           comm(2, n=0, communicator="ep", size=3 << 20))
    graph = RankGraph(rank=0, num_ranks=64, ops=ops, communicators={"tp": [0, 1, 2, 3], "dp": list(range(0, 64, 4))})
    costs = run_graphs([graph], h100, num_gpus=32).costs
    assert set(costs) == {("allreduce", 4, 1 << 20), ("allreduce", 16, 2 << 20), ("allreduce", 32, 3 << 20)}


def test_a_group_that_does_not_fill_servers_is_rounded_up_and_said(h100):
    result = run_graphs([RankGraph(rank=0, num_ranks=12, ops=(comm(0, n=12),))], h100)
    assert set(result.costs) == {("allreduce", 16, 1 << 20)}
    assert result.notes == ("dp group of 12 GPUs costed as 16 (whole servers of 8)",)


def test_a_peer_in_another_server_crosses_the_network(h100):
    ops = (comm(0, "send", size=1 << 24, n=2, peer=1, communicator="pp"),
           comm(1, "recv", size=1 << 24, n=2, peer=9, communicator="pp"))
    result = run_graphs([RankGraph(rank=0, num_ranks=16, ops=ops)], h100)
    assert set(result.costs) == {("sendrecv", 2, 1 << 24), ("sendrecv", 16, 1 << 24)}
    assert result.costs[("sendrecv", 16, 1 << 24)] > result.costs[("sendrecv", 2, 1 << 24)]


def test_costs_are_asked_once_per_collective_and_group_and_can_be_kept(h100, monkeypatch):
    calls = []

    def counting(cluster, n, sizes, collective, **kw):
        calls.append((collective, n, tuple(sizes)))
        return predict.collective_times(cluster, n, sizes, collective, **kw)

    monkeypatch.setattr(graph_run, "collective_times", counting)
    graphs = [RankGraph(rank=r, num_ranks=8, ops=tuple(comm(i, size=(i % 3 + 1) << 20) for i in range(30)))
              for r in range(8)]
    cache: dict = {}
    run_graphs(graphs, h100, cache=cache)
    assert calls == [("allreduce", 8, (1 << 20, 2 << 20, 3 << 20))]
    run_graphs(graphs, h100, cache=cache)
    assert len(calls) == 1 and len(cache) == 3


def test_schedule_and_rank_time_agree_with_the_critical_path():
    ops = (compute(3, 1.0, deps=(5,)), compute(5, 2.0), comm(4, duration_s=4.0, deps=(5,)),
           comm(6, duration_s=1.0, deps=(4,)), compute(7, 0.5, deps=(3,)))
    graph = RankGraph(rank=0, num_ranks=2, ops=ops)
    times = schedule(graph)
    assert times[5] == (0.0, 2.0) and times[4] == (2.0, 6.0) and times[6] == (6.0, 7.0) and times[7] == (3.0, 3.5)
    t = rank_time(graph)
    assert t.step_s == graph.critical_path_s() == 7.0
    assert (t.compute_s, t.exposed_comm_s, t.comm_s) == (3.5, 3.5, {"dp": 5.0})


def test_bad_input_says_what_to_give(h100):
    with pytest.raises(ValueError, match="no rank graphs"):
        run_graphs([], h100)
    with pytest.raises(ValueError, match="even number"):
        sample_graphs(3)
