"""`fabriclab bench sim`'s cases: the ring of 16,384 hosts in its steady state, predictions at scale (small here)."""

from fractions import Fraction

import pytest

from fabriclab.bench.speed import predict, sim
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.sim.collective import simulate


def test_the_16384_host_ring_keeps_its_answer():
    # the time `bench sim` recorded before its rounds came as runs (0.563050943999902 s)
    topo = build_topology(TopologySpec(kind="fat-tree", hosts=16384, hosts_per_leaf=16, bisection=Fraction(1, 4),
                                       bandwidth_Bps=4e9, latency_s=0.2e-6))
    result = simulate("allreduce", "ring", topo, 16384, 2**30)
    assert result.exact and result.time_s == pytest.approx(0.563050943999902, rel=1e-12)
    assert next(c for c in sim.CASES if c.name == "ring-16384").target_s == 5.0


def test_a_small_prediction_row_compares_both_engines():
    case = predict.PredictionCase(name="alltoall-64", collective="alltoall", gpus=64, general_gpus=(16, 32))
    row = predict.run_prediction(case)
    assert row["general_gpus"] == 32 and row["general_agrees"] is True and row["meets_target"]
    assert row["sweep_wall_s"] > 0 and row["peak_MB"] > 10 and row["speedup_vs_general"] > 0


def test_the_growth_table_has_a_row_per_gpu_count():
    rows = predict.scale_rows(gpus=(16, 64), collectives=("allreduce",))
    assert [r["gpus"] for r in rows] == [16, 64]
    assert all(r["allreduce_wall_s"] > 0 and r["allreduce_peak_MB"] > 10 for r in rows)


def test_a_general_engine_refusal_ends_the_ladder():
    assert predict.timed("links", "alltoall", 2048, "general") is None


def test_a_prediction_with_a_peer_reports_the_ratio_of_the_same_run():
    case = predict.PredictionCase(name="alltoall-64-peer", collective="alltoall", gpus=64, general_gpus=(),
                                  peer_gpus=16)
    row = predict.run_prediction(case)
    assert row["peer"] == f"16 GPUs of {predict.CLUSTER}" and row["general_gpus"] is None
    assert row["vs_peer"] == row["sweep_wall_s"] / row["peer_wall_s"] and row["peer_peak_MB"] > 0
    assert {c.cluster for c in predict.CASES if c.gpus >= 1_000_000} == {predict.CAMPUS}
