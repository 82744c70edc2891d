"""`fabriclab bench plan`: its rows and the ratio to the ring plan of the same run (a tiny grid here)."""

from fractions import Fraction

from fabriclab.bench.speed import plan


def test_rows_carry_budgets_and_the_ratio_to_ring():
    r = plan.run(gpus=(64,), fabrics=("100gbe",), bisections=(Fraction(1),), models=("resnet50",),
                 wide_gpus=(16, 64))
    first, ring, nccl = r["rows"]
    assert (first["algo"], ring["algo"], nccl["algo"]) == ("ring", "ring", "nccl")
    assert first["vs_peer"] is None and ring["vs_peer"] == 1.0
    assert nccl["vs_peer"] == nccl["wall_s"] / ring["wall_s"] and nccl["cpu_vs_peer"] > 0
    assert ring["points"] == nccl["points"] == 2 and all(row["budget_s"] == plan.TARGET_S for row in r["rows"])
    assert r["points"] == first["points"] == 1 and "ring, 16-64 GPUs" in plan.report(r)
