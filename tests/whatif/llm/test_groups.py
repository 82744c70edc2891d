"""The rank groups of a job's communicators (`whatif/llm/groups.py`): kept per parallel shape in a dict that
configurations of one shape share (the plan's), the same groups as computed alone, and what `CommModel`
costs from them unchanged by the sharing."""

from dataclasses import replace

import numpy as np
import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.comm import CommModel
from fabriclab.whatif.llm.groups import RankGroups, communicator_groups
from fabriclab.workload.parallel import ParallelConfig

PAR = ParallelConfig(num_gpus=64, tp=2, pp=2, cp=2, ep=4, gbs=64, seq=1024)


def test_configurations_of_one_shape_share_their_groups_and_others_do_not():
    memo = {}
    first = RankGroups(par=PAR, memo=memo)
    groups = first.groups("edp")
    assert RankGroups(par=replace(PAR, gbs=128, zero=3), memo=memo).groups("edp") is groups  # same shape
    assert RankGroups(par=replace(PAR, order="dp-tp-cp-pp"), memo=memo).groups("edp") is not groups
    assert np.array_equal(groups, communicator_groups(PAR, "edp"))
    assert first.coordinates() is RankGroups(par=replace(PAR, seq=2048), memo=memo).coordinates()
    # HSDP's groups depend on the shard group, the others do not
    assert not np.array_equal(first.groups("shard", 4), first.groups("shard", 8))
    assert np.array_equal(first.groups("shard", 4), communicator_groups(PAR, "shard", 4))
    with pytest.raises(ValueError, match="communicator 'xx'"):
        first.groups("xx")


def test_a_shared_memo_leaves_the_costs_as_they_were():
    cluster, memo = cluster_preset("dgx-h100"), {}
    alone = CommModel(cluster, PAR, shard_group=4)
    CommModel(cluster, replace(PAR, gbs=128), memo=memo)  # another configuration of the shape fills it first
    shared = CommModel(cluster, PAR, shard_group=4, memo=memo)
    assert shared.shapes == alone.shapes and memo
    assert shared.time("dpcp", "reduce_scatter", 1e8) == alone.time("dpcp", "reduce_scatter", 1e8)
