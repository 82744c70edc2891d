"""`nccl/jobs.py`: jobs sharing a fabric, checked against closed forms (bytes over the busiest link)."""

from dataclasses import replace

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.jobs import JobSpec, job_flows, simulate_jobs

MiB = 1 << 20


def _tree(*, routing="ideal", leaf_ports=32, bisection=1.0, seed=0):
    """dgx-h100 on a plain fat tree (a server's 8 NICs share a leaf)."""
    c = cluster_preset("dgx-h100")
    return replace(c, network=replace(c.network, fabric="fat-tree", routing=routing, leaf_ports=leaf_ports,
                                      bisection=bisection, routing_seed=seed))


def _nic_Bps(c):
    return c.server.nic_bandwidth_Bps * c.server.nic_efficiency


def _ring(gpus, size=256 * MiB, collective="allreduce"):
    return JobSpec(collective=collective, num_gpus=gpus, size_bytes=size)


@pytest.mark.parametrize("routing", ["ideal", "ecmp", "adaptive"])
@pytest.mark.parametrize("job", [_ring(64), _ring(4), _ring(64, collective="allgather"),
                                 JobSpec(collective="alltoall", num_gpus=32, size_bytes=64 * MiB)])
def test_one_job_alone_has_slowdown_one(routing, job):
    (r,) = simulate_jobs(_tree(routing=routing), [job], placement="scattered", busy=0.5, num_seeds=3)
    assert list(r.slowdowns) == [1.0, 1.0, 1.0] and r.alone_s == r.together_s and min(r.alone_s) > 0


def test_a_packed_ring_alone_takes_its_bus_bytes_over_its_servers_nics():
    c = _tree()
    (r,) = simulate_jobs(c, [_ring(64)])
    bus = 2 * 63 / 64 * 256 * MiB
    assert r.alone_s[0] == pytest.approx(bus / (8 * _nic_Bps(c)), rel=1e-12)


@pytest.mark.parametrize("routing", ["ideal", "ecmp", "adaptive"])
def test_jobs_on_disjoint_leaves_of_a_non_blocking_tree_do_not_slow_each_other(routing):
    # 4 servers a leaf: each job of 64 GPUs fills two leaves of its own.
    results = simulate_jobs(_tree(routing=routing), [_ring(64), JobSpec(collective="alltoall", num_gpus=64,
                                                                         size_bytes=64 * MiB)], num_seeds=2)
    assert [list(r.slowdowns) for r in results] == [[1.0, 1.0], [1.0, 1.0]]
    assert [r.leaves for r in results] == [(2, 2), (2, 2)]


def _split_leaves(routing="ideal", bisection=0.25):
    """Two leaves of 2 servers (16 ports) with 16 x bisection spines; two jobs of 2 servers, one on each leaf."""
    return _tree(routing=routing, leaf_ports=16, bisection=bisection)


def test_two_rings_across_the_same_oversubscribed_up_links_slow_each_other_by_the_ratio():
    c = _split_leaves()
    a, b = simulate_jobs(c, [_ring(16), _ring(16)], placement="interleaved")
    # Each ring's edge between its two servers carries the bus bytes (16 channels) up over the leaf's 4 spine
    # links (D-mod-K: its 8 destination NICs' ports mod 4); the other job's ring doubles what they carry.
    bus = 2 * 15 / 16 * 256 * MiB
    assert a.alone_s[0] == pytest.approx(bus / (4 * _nic_Bps(c)), rel=1e-12)
    assert a.slowdowns[0] == pytest.approx(2.0, rel=1e-12) and b.slowdowns[0] == pytest.approx(2.0, rel=1e-12)


def test_all_to_alls_across_oversubscribed_up_links_slow_each_other_by_the_ratio():
    c = _split_leaves()
    jobs = [JobSpec(collective="alltoall", num_gpus=16, size_bytes=64 * MiB)] * 2
    a, b = simulate_jobs(c, jobs, placement="interleaved")
    # 64 pairs cross from a server to the other, size / 16 each: 4 x size over 4 up-links.
    assert a.alone_s[0] == pytest.approx(64 * MiB / _nic_Bps(c), rel=1e-12)
    assert a.slowdowns[0] == pytest.approx(2.0) and b.slowdowns[0] == pytest.approx(2.0)


def test_a_non_blocking_tree_or_adaptive_routing_keeps_split_leaves_apart():
    for c in (_split_leaves(bisection=1.0), _split_leaves("adaptive", bisection=1.0)):
        a, b = simulate_jobs(c, [_ring(16), _ring(16)], placement="interleaved")
        assert a.slowdowns[0] == pytest.approx(1.0) and b.slowdowns[0] == pytest.approx(1.0)
    # adaptive spreads both jobs over the 4 oversubscribed up-links: the same ratio as D-mod-K
    a, _ = simulate_jobs(_split_leaves("adaptive"), [_ring(16), _ring(16)], placement="interleaved")
    assert a.slowdowns[0] == pytest.approx(2.0)


def test_ecmp_collides_where_d_mod_k_does_not_and_seeds_are_reproducible():
    jobs = [_ring(64), _ring(64)]
    ideal = simulate_jobs(_tree(), jobs, placement="interleaved")
    assert [r.slowdowns[0] for r in ideal] == [1.0, 1.0]
    ecmp = simulate_jobs(_tree(routing="ecmp"), jobs, placement="interleaved", num_seeds=8)
    again = simulate_jobs(_tree(routing="ecmp"), jobs, placement="interleaved", num_seeds=8)
    assert [r.together_s for r in ecmp] == [r.together_s for r in again]
    other = simulate_jobs(_tree(routing="ecmp", seed=100), jobs, placement="interleaved", num_seeds=8)
    assert [r.together_s for r in ecmp] != [r.together_s for r in other]
    assert all(min(r.slowdowns) >= 1.0 for r in ecmp) and max(ecmp[0].slowdowns) > 1.0
    assert min(ecmp[0].alone_s) >= ideal[0].alone_s[0] * (1 - 1e-12)


def test_more_queue_pairs_spread_ecmp_flows():
    jobs = [_ring(64), _ring(64)]
    one = simulate_jobs(_tree(routing="ecmp"), jobs, placement="interleaved", num_seeds=8)
    c = _tree(routing="ecmp")
    four = simulate_jobs(replace(c, network=replace(c.network, qps_per_connection=4)), jobs,
                         placement="interleaved", num_seeds=8)
    assert sum(four[0].together_s) < sum(one[0].together_s)


def test_flows_sit_on_the_jobs_servers():
    c = _tree()
    src, dst, size = job_flows(c, _ring(16), (3, 9))
    assert set((src // 8).tolist()) == {3, 9} == set((dst // 8).tolist())
    assert size.sum() == pytest.approx(16 * 16 * 2 * 15 / 16 * 256 * MiB / 16)


@pytest.mark.parametrize("job, words", [
    (JobSpec(collective="broadcast", num_gpus=8, size_bytes=1), "use one of"),
    (JobSpec(collective="alltoall", num_gpus=2048, size_bytes=1), "at most 1,024 GPUs"),
    (JobSpec(collective="allreduce", num_gpus=12, size_bytes=1), "whole servers")])
def test_bad_jobs_say_what_to_change(job, words):
    with pytest.raises(ValueError, match=words):
        simulate_jobs(_tree(), [job])


def test_a_per_message_hash_averages_its_draws_and_a_job_keeps_its_hashes_when_others_join():
    c = _tree(routing="ecmp")
    c = replace(c, network=replace(c.network, hash_per_message=True, messages_in_flight=2))
    (alone,) = simulate_jobs(c, [_ring(64)])
    a, b = simulate_jobs(c, [_ring(64), _ring(64)])  # packed: the first job on the same servers
    assert a.alone_s == pytest.approx(alone.alone_s, rel=1e-12) and alone.slowdowns[0] == 1.0
    a, b = simulate_jobs(c, [_ring(64), _ring(64)], placement="interleaved")
    assert 1.0 < a.slowdowns[0] < 2.0 and 1.0 < b.slowdowns[0] < 2.0
