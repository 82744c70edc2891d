"""Checkpoints: their size from the model and optimizer, the write over the storage path, the pause synchronous
and asynchronous, and Young's and Daly's intervals against the numeric optimum of Daly's complete model."""

import math
from dataclasses import replace

import numpy as np
import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.fabric.storage import StorageSpec
from fabriclab.whatif.goodput.checkpoint import (CheckpointPolicy, checkpoint_of, daly_interval, ettr, state_bytes,
                                                 young_interval)
from fabriclab.workload.memory import memory_per_gpu
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model


@pytest.mark.parametrize("pause,mttf", [(3.0, 11_000.0), (60.0, 3_000.0), (300.0, 40_000.0), (0.5, 200_000.0)])
def test_dalys_interval_is_where_the_share_of_time_that_trains_peaks(pause, mttf):
    taus = np.geomspace(1, 50 * math.sqrt(2 * pause * mttf), 20_000)
    best = taus[np.argmax([ettr(t, pause, 600.0, mttf) for t in taus])]
    assert daly_interval(pause, mttf) == pytest.approx(best, rel=0.02)
    assert ettr(daly_interval(pause, mttf), pause, 600.0, mttf) >= ettr(young_interval(pause, mttf), pause, 600, mttf)


def test_young_and_daly_agree_when_the_pause_is_short_and_daly_stops_at_m():
    assert daly_interval(1.0, 1e6) == pytest.approx(young_interval(1.0, 1e6), rel=0.001)
    assert daly_interval(500.0, 200.0) == 200.0


def test_the_share_of_time_that_trains_falls_with_the_restart_and_with_failures():
    assert ettr(300, 3, 600, 11_000) > ettr(300, 3, 1200, 11_000) > 0
    assert ettr(300, 3, 600, 11_000) < ettr(300, 3, 600, 22_000) < 300 / 303
    assert ettr(300, 3, 600, math.inf) == pytest.approx(300 / 303)  # no failures: the pauses alone


def _job(gpus=1024, tp=8, pp=8, zero=1):
    spec = load_model("llama3-70b")
    par = ParallelConfig(num_gpus=gpus, tp=tp, pp=pp, gbs=gpus // (tp * pp) * 4, seq=8192, zero=zero,
                         recompute="full")
    return spec, par, memory_per_gpu(spec, par)


def test_a_checkpoint_is_14_bytes_a_parameter_and_one_gpus_share_comes_from_its_parallelism():
    spec, par, memory = _job()
    c = checkpoint_of(spec, par, memory, cluster_preset("dgx-h100"))
    assert c.total_bytes == state_bytes(spec) == spec.num_params() * 14
    replicas = par.dp * par.cp  # ZeRO-1: the weights' writes spread over the replicas, the optimizer sharded
    assert c.shard_bytes == pytest.approx(memory.weights_bytes / replicas + memory.optimizer_bytes)
    assert c.total_bytes / par.num_gpus <= c.shard_bytes * 1.5  # the largest share is near the mean


def test_the_write_is_bound_by_the_file_system_or_by_one_servers_path():
    spec, par, memory = _job()
    cluster = cluster_preset("dgx-h100")
    total = checkpoint_of(spec, par, memory, cluster)
    assert total.bound == "storage total" and total.write_s == pytest.approx(total.total_bytes / 2e12)
    slow = replace(cluster, storage=StorageSpec(per_server_Bps=1e9, total_Bps=1e15))
    server = checkpoint_of(spec, par, memory, slow)
    assert server.bound == "per server" and server.write_s == pytest.approx(server.shard_bytes * 8 / 1e9)
    assert total.read_s == total.write_s and total.pause_s == total.write_s and total.lag_s == 0


def test_an_asynchronous_checkpoint_pauses_for_the_copy_to_host_and_is_safe_a_write_later():
    spec, par, memory = _job()
    cluster = cluster_preset("dgx-h100")
    c = checkpoint_of(spec, par, memory, cluster, CheckpointPolicy(asynchronous=True))
    assert c.pause_s == pytest.approx(c.shard_bytes / cluster.server.pcie_bandwidth_Bps)
    assert c.lag_s == c.write_s and c.pause_s < c.write_s


@pytest.mark.parametrize("kwargs,named", [({"interval_s": 0}, "--checkpoint-interval"),
                                          ({"interval_s": math.nan}, "--checkpoint-interval"),
                                          ({"restart_s": -1}, "--restart-time")])
def test_a_bad_policy_says_which_option_to_change(kwargs, named):
    with pytest.raises(ValueError, match=named):
        CheckpointPolicy(**kwargs)
