"""Server-aware all-reduce (NCCL 2.4 ring/tree), Horovod's background loop, and rescaled profiles."""

import math

import pytest

from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.iteration import simulate_horovod_iteration, simulate_iteration
from fabriclab.whatif.profiles import flops_profile, scaled_profile, training_flops_rate
from fabriclab.nccl.nccl24 import ServerAllReduce
from fabriclab.workload.profile import GradReady, Profile, load_profile
from fabriclab.workload.zoo import layer_table

S = 100e6


def _cost(**kw):
    base = {"num_servers": 4, "gpus_per_server": 8, "nic_Bps": 1e9, "intra_Bps": 100e9, "ring_step_s": 0.0,
                "tree_inter_s": 0.0, "tree_intra_s": 0.0}
    return ServerAllReduce(**{**base, **kw})


def test_ring_sends_2_n_minus_1_over_n_through_each_nic():
    cost = _cost(algorithm="ring")
    assert cost.nic_bytes(S, "ring") == pytest.approx(2 * 31 / 32 * S)
    assert cost(S) == pytest.approx(2 * 31 / 32 * S / 1e9)


def test_tree_between_two_servers_sends_the_buffer_once():
    # Each server is the other's only child in both trees: S/2 up in one, S/2 down in the other.
    assert _cost(num_servers=2, algorithm="tree")(S) == pytest.approx(S / 1e9)
    assert _cost(num_servers=4, algorithm="tree").nic_bytes(S, "tree") == 2 * S


def test_one_server_uses_its_internal_links_only():
    cost = _cost(num_servers=1, gpus_per_server=4, algorithm="nccl-2.4")
    assert cost.algorithm_for(S) == "ring"
    assert cost(S) == pytest.approx(2 * 3 / 4 * S / 100e9)


def test_nccl_24_threshold_follows_its_source():
    # NVLink and 2 nodes: NCCL 2.4 doubles the tree bandwidth guess above the ring's -> trees always.
    assert _cost(num_servers=2, nvlink=True).tree_threshold_bytes() == math.inf
    # PCIe, 32 nodes of 2 GPUs: (5000 * 3333.3 / 1666.7 B/us) * (6 us * 63 - (15 us * 5 + 4 us)).
    pcie = ServerAllReduce(num_servers=32, gpus_per_server=2, nic_Bps=1e9, intra_Bps=10e9)
    assert pcie.tree_threshold_bytes() == pytest.approx(10000 * (6 * 63 - 79))
    assert pcie.algorithm_for(1e6) == "tree" and pcie.algorithm_for(1e8) == "ring"


def test_ring_latency_is_paid_per_step():
    cost = _cost(algorithm="ring", ring_step_s=6e-6)
    assert cost(1.0) == pytest.approx(2 * 31 * 6e-6 + 2 * 31 / 32 / 1e9)


def test_bad_servers_are_refused():
    with pytest.raises(ValueError, match="servers"):
        _cost(num_servers=0)
    with pytest.raises(ValueError, match="algorithm"):
        _cost(algorithm="butterfly")


def _toy():
    grads = tuple(GradReady(name=f"g{i}", size_bytes=1_000_000, ready_s=0.001 * (i + 1)) for i in range(40))
    return Profile(model="toy", device="test", batch_size=1, iteration_s=0.1, grads=grads)


def test_horovod_loop_with_free_communication_fuses_per_cycle():
    policy = FusionPolicy(name="horovod", cycle_time_s=5e-3)
    loop = simulate_horovod_iteration(_toy(), policy, lambda size: 0.0)
    clock = simulate_iteration(_toy(), policy, lambda size: 0.0)
    assert loop.num_buckets == clock.num_buckets == 8 and loop.overhead_s == 0.0


def test_slow_communication_makes_fewer_larger_buffers():
    policy = FusionPolicy(name="horovod", cycle_time_s=5e-3)
    loop = simulate_horovod_iteration(_toy(), policy, lambda size: 0.012)
    clock = simulate_iteration(_toy(), policy, lambda size: 0.012)
    # Cycles at 5, 17, 29, 41 ms take what is ready then (all 40 by 41 ms): 4 buffers, done at 53 ms;
    # on the fixed clock, 8 buffers queue up 12 ms each behind the one at 5 ms: done at 101 ms.
    assert loop.num_buckets == 4 and loop.t_sync_s == pytest.approx(0.053)
    assert clock.num_buckets == 8 and clock.t_sync_s == pytest.approx(0.101)


def test_horovod_loop_respects_the_fusion_threshold():
    policy = FusionPolicy(name="horovod", cycle_time_s=1.0, fusion_threshold_bytes=10_000_000)
    r = simulate_horovod_iteration(_toy(), policy, lambda size: 0.0)
    assert r.num_buckets == 4   # 40 MB ready at the first tick, in buffers of at most 10 MB


def test_scaled_profile_scales_every_time_and_the_batch():
    p = load_profile("resnet50")
    q = scaled_profile(p, time_factor=1.5, batch_size=64)
    assert q.iteration_s == pytest.approx(p.iteration_s * 3)
    assert q.backward_s == pytest.approx(p.backward_s * 3)
    assert q.param_bytes == p.param_bytes and q.batch_size == 64


def test_flops_profile_matches_its_rate_and_the_table():
    rate = training_flops_rate([load_profile("resnet50")])
    assert rate == pytest.approx(3 * layer_table("resnet50").forward_flops * 32 / load_profile("resnet50").iteration_s)
    p = flops_profile("inception_v3", rate, 32, 0.5)
    assert p.iteration_s == pytest.approx(3 * layer_table("inception_v3").forward_flops * 32 / rate)
    assert p.backward_s == pytest.approx(0.5 * p.iteration_s)
    assert p.param_bytes == layer_table("inception_v3").param_bytes
