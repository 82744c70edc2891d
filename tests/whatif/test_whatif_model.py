"""The iteration replay and the three cost models against each other and against seed 004."""

import pytest

from fabriclab.fabric import star
from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.iteration import simulate_iteration
from fabriclab.whatif.sweep import compression_needed
from fabriclab.workload.addcost import builtin_add_cost
from fabriclab.workload.profile import GradReady, Profile, load_profile

ADD = builtin_add_cost()


def _toy(t_batch=0.1):
    grads = tuple(GradReady(name=f"g{i}", size_bytes=4_000_000, ready_s=0.01 * (i + 1)) for i in range(5))
    return Profile(model="toy", device="test", batch_size=1, iteration_s=t_batch, grads=grads)


def test_free_communication_scales_perfectly():
    r = simulate_iteration(_toy(), FusionPolicy(), lambda size: 0.0)
    assert r.scaling_factor == 1.0 and r.overhead_s == 0.0


def test_without_overlap_the_whole_allreduce_is_exposed():
    r = simulate_iteration(_toy(), FusionPolicy(name="none"), lambda size: 0.02)
    assert r.overhead_s == pytest.approx(0.02)
    assert r.scaling_factor == pytest.approx(0.1 / 0.12)


def test_overlap_hides_all_but_the_last_bucket():
    # Each 4 MB gradient is its own bucket (10 ms apart > 5 ms); each all-reduce takes 4 ms.
    r = simulate_iteration(_toy(), FusionPolicy(), lambda size: 0.004)
    assert r.num_buckets == 5 and r.overhead_s == pytest.approx(0.004)


@pytest.mark.parametrize("n", [16, 64])
def test_closed_form_ring_without_latency_is_the_paper_formula(n):
    paper = CostModel(bandwidth_Bps=10e9 / 8, num_workers=n, add_cost=ADD)
    ring = CostModel(kind="closed-form", algo="ring", bandwidth_Bps=10e9 / 8, num_workers=n, add_cost=ADD)
    for size in (1e3, 4e6, 64e6):
        assert ring(size) == pytest.approx(paper(size), rel=1e-9)


def test_simulated_ring_on_a_star_is_the_paper_formula():
    n = 16
    topo = star(hosts=n, link_Bps=10e9 / 8, latency_s=0)
    sim = CostModel(kind="simulated", algo="ring", topology=topo, bandwidth_Bps=10e9 / 8, num_workers=n,
                    add_cost=ADD)
    paper = CostModel(bandwidth_Bps=10e9 / 8, num_workers=n, add_cost=ADD)
    size = n * 4 * 250_000
    assert sim(size) == pytest.approx(paper(size), rel=1e-6)


def test_seed_004_near_linear_at_100_gbps():
    for model in ("resnet50", "resnet101", "vgg16"):
        p = load_profile(model)
        for n in (16, 32, 64):
            f = simulate_iteration(p, FusionPolicy(), CostModel(bandwidth_Bps=100e9 / 8, num_workers=n,
                                                               add_cost=ADD)).scaling_factor
            assert 0.99 < f <= 1.0


def test_seed_004_compression_answer_at_10_gbps():
    need = {m: compression_needed(load_profile(m), FusionPolicy(),
                                  CostModel(bandwidth_Bps=10e9 / 8, num_workers=32, add_cost=ADD), 0.9)
            for m in ("resnet50", "vgg16")}
    # The paper: 2x-5x is enough for the ResNets, 10x for VGG16.
    assert 2 <= need["resnet50"] <= 5 and 5 < need["vgg16"] <= 10


def test_bad_cost_model_inputs():
    with pytest.raises(ValueError, match="unknown cost model"):
        CostModel(kind="magic")
    with pytest.raises(ValueError, match="needs a topology"):
        CostModel(kind="simulated")
