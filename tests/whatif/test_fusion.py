"""Fusion policies group gradients as their sources say."""

import pytest

from fabriclab.whatif.fusion import MIB, FusionPolicy


def _grads(n, size, step_s):
    return [size] * n, [step_s * (i + 1) for i in range(n)]


def test_time_or_size_flushes_every_5ms_of_backward():
    sizes, ready = _grads(10, 1000, 1e-3)
    buckets = FusionPolicy().buckets(sizes, ready)
    assert [b.num_grads for b in buckets] == [5, 5]
    assert [b.ready_s for b in buckets] == pytest.approx([5e-3, 10e-3])


def test_time_or_size_flushes_at_64_mib():
    sizes, ready = _grads(5, 40 * MIB, 1e-5)
    buckets = FusionPolicy().buckets(sizes, ready)
    assert [b.num_grads for b in buckets] == [2, 2, 1]
    assert buckets[0].size_bytes == 80 * MIB


def test_horovod_fuses_what_is_ready_at_each_cycle():
    sizes, ready = [10, 10, 10, 10], [0.2e-3, 0.9e-3, 1.5e-3, 4.2e-3]
    buckets = FusionPolicy(name="horovod", cycle_time_s=1e-3).buckets(sizes, ready)
    assert [(b.num_grads, round(b.ready_s * 1e3, 6)) for b in buckets] == [(2, 1.0), (1, 2.0), (1, 5.0)]


def test_horovod_splits_at_the_fusion_threshold():
    sizes, ready = [30 * MIB] * 4, [0.1e-3] * 4
    buckets = FusionPolicy(name="horovod").buckets(sizes, ready)
    assert [b.num_grads for b in buckets] == [2, 2]


def test_ddp_first_bucket_is_small_then_25_mib():
    sizes, ready = [512 * 1024] * 4 + [10 * MIB] * 5, [i * 1e-3 for i in range(9)]
    buckets = FusionPolicy(name="ddp").buckets(sizes, ready)
    assert buckets[0].size_bytes == 1 * MIB and buckets[0].ready_s == pytest.approx(1e-3)
    assert all(b.size_bytes <= 25 * MIB for b in buckets[1:])
    assert sum(b.size_bytes for b in buckets) == sum(sizes)


def test_none_is_one_bucket_at_the_end():
    sizes, ready = _grads(7, 3, 1e-3)
    (bucket,) = FusionPolicy(name="none").buckets(sizes, ready)
    assert bucket.size_bytes == 21 and bucket.ready_s == pytest.approx(7e-3)


def test_unknown_policy_lists_the_known_ones():
    with pytest.raises(ValueError, match="use one of time-or-size, horovod, ddp, none"):
        FusionPolicy(name="greedy").buckets([1], [0.0])


def test_the_old_spelling_is_the_same_policy():
    sizes, ready = _grads(10, 1000, 1e-3)
    assert FusionPolicy(name="paper004") == FusionPolicy(name="time-or-size")
    assert FusionPolicy(name="paper004").buckets(sizes, ready) == FusionPolicy().buckets(sizes, ready)
