"""The busiest links of an LLM step: groups of every communicator, the traffic each collective sends, and the
bytes the routes put on the links, checked by conservation and by placements whose answer is known."""

import numpy as np
import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.groups import communicator_groups
from fabriclab.whatif.llm.links import busiest_links, link_loads, traffic, _link_kinds, KINDS
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")


def _partition(groups: np.ndarray, num_gpus: int) -> None:
    assert sorted(groups.ravel().tolist()) == list(range(num_gpus))


@pytest.mark.parametrize("kw", [dict(tp=2, pp=2, cp=2, ep=4), dict(tp=4, pp=1, cp=1, ep=2), dict(tp=1, pp=4, cp=2, ep=1)])
def test_groups_partition_the_ranks_and_match_the_parallel_config(kw):
    par = ParallelConfig(num_gpus=64, gbs=64, seq=1024, **kw)
    for name in ("tp", "cp", "ep", "dp", "pp"):
        groups = communicator_groups(par, name)
        assert groups.tolist() == par.groups(name)
    coords = par.coordinates()
    dpcp = communicator_groups(par, "dpcp")
    _partition(dpcp, 64)
    assert dpcp.shape[1] == par.dp * par.cp
    for g in dpcp:  # one tensor and one pipeline index per group, every (dp, cp) position once
        assert len(set(coords["tp"][g])) == 1 and len(set(coords["pp"][g])) == 1
    edp = communicator_groups(par, "edp")
    _partition(edp, 64)
    expert = par.expert_coordinates()
    for g in edp:  # the same expert shard: one position in the ETP and EP groups, one pipeline stage
        assert all(len(set(expert[d][g].tolist())) == 1 for d in ("etp", "ep", "pp"))
    assert edp.shape[1] == par.edp
    with pytest.raises(ValueError, match="communicator"):
        communicator_groups(par, "xx")


def test_traffic_of_each_collective_sends_what_a_gpu_sends():
    groups = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    src, dst, size = traffic(groups, "allgather", 8.0, 3, gpus_per_server=8)
    assert list(zip(src[:4], dst[:4])) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert size.sum() == pytest.approx(2 * 4 * 3 / 4 * 8 * 3)
    _, _, size = traffic(groups, "allreduce", 8.0, 1, gpus_per_server=8)
    assert size.sum() == pytest.approx(2 * 4 * 2 * 3 / 4 * 8)
    src, dst, size = traffic(groups, "alltoall", 8.0, 1, gpus_per_server=8)
    assert src.size == 2 * 12 and (src != dst).all() and size.sum() == pytest.approx(2 * 4 * 3 / 4 * 8)
    with pytest.raises(ValueError, match="collective"):  # messages are routed per stage (stage_traffic)
        traffic(groups, "sendrecv", 8.0, 2, gpus_per_server=8)
    assert traffic(groups[:, :1], "allgather", 8.0, 1, gpus_per_server=8)[0].size == 0
    with pytest.raises(ValueError, match="collective"):
        traffic(groups, "gossip", 8.0, 1, gpus_per_server=8)


def _crossing(answer, gpus_per_server=8) -> dict[str, float]:
    """Bytes per communicator that leave a server, from every stage's collectives on that stage's groups
    and the pipeline's messages (one per micro-batch and direction on each pipeline)."""
    par = answer.par
    stage_of = par.coordinates()["pp"]
    crossing: dict[str, float] = {}
    for s, entries in enumerate(answer.result.comm_by_stage):
        for entry in entries:
            name = entry["communicator"]
            if name == "pp":
                continue
            groups = communicator_groups(par, name)
            groups = groups[stage_of[groups[:, 0]] == s]
            src, dst, size = traffic(groups, entry["collective"], entry["size_bytes"], entry["calls_per_step"],
                                     gpus_per_server=gpus_per_server, num_channels=H100.library.num_channels)
            crossing[name] = crossing.get(name, 0.0) + size[src // gpus_per_server != dst // gpus_per_server].sum()
    pipes = communicator_groups(par, "pp")
    hops = (pipes[:, :-1] // gpus_per_server != pipes[:, 1:] // gpus_per_server).sum()
    act = par.mbs * par.seq * answer.spec.hidden_size * 2 / par.tp
    crossing["pp"] = 2 * hops * par.num_microbatches * act  # activations forward, gradients backward
    return crossing


def _up_links(topology):
    kinds = _link_kinds(topology)
    names = np.array([topology.link_name(i) for i in range(topology.num_links)])
    return np.array([n.split("->")[1].startswith("leaf") for n in names]) & (kinds == KINDS.index("NIC-leaf"))


def test_bytes_leaving_the_servers_are_the_cross_server_traffic_of_every_stage():
    """Conservation: whatever the routes, every byte a pair sends between servers leaves through exactly one
    NIC -> leaf link, and every stage sends its own."""
    par = ParallelConfig(num_gpus=32, tp=2, pp=2, gbs=32, seq=1024)
    answer = simulate_llm(load_model("llama3-8b"), par, H100, efficiency=0.5)
    topology, loads = link_loads(answer)
    up = _up_links(topology)
    crossing = _crossing(answer)
    assert crossing["pp"] > 0 and crossing.get("tp", 0.0) == 0
    for name, value in crossing.items():
        assert loads.get(name, np.zeros(topology.num_links))[up].sum() == pytest.approx(value)


def test_moe_stages_carry_their_own_all_to_alls():
    """DeepSeek-style: the first stage holds dense layers, the others only MoE layers; the network carries
    each stage's all-to-alls, not the first stage's counts on every stage."""
    spec = load_model("deepseek-v3")
    par = ParallelConfig(num_gpus=256, tp=1, pp=4, ep=32, gbs=256, seq=1024)
    answer = simulate_llm(spec, par, H100, efficiency=0.5, check_memory=False)
    calls = [sum(e["calls_per_step"] for e in entries if e["communicator"] == "ep")
             for entries in answer.result.comm_by_stage]
    assert calls[0] < calls[1]  # stage 0: 3 dense layers of its 16 have no experts
    topology, loads = link_loads(answer)
    assert loads["ep"][_up_links(topology)].sum() == pytest.approx(_crossing(answer)["ep"])


def test_tensor_parallel_traffic_stays_on_nvlink_and_dp_traffic_crosses_the_network():
    spec = load_model("llama3-8b")
    tp_only = simulate_llm(spec, ParallelConfig(num_gpus=8, tp=8, gbs=8, seq=1024), H100, efficiency=0.5)
    assert [x.kind for x in busiest_links(tp_only)] == ["NVLink"]
    dp = simulate_llm(spec, ParallelConfig(num_gpus=16, tp=1, gbs=16, seq=1024, zero=1), H100, efficiency=0.5)
    rows = {x.kind: x for x in busiest_links(dp)}
    assert {"NVLink", "PCIe", "NIC-leaf"} <= set(rows)
    leaf = rows["NIC-leaf"]
    # every channel's ring of 16 crosses between the two servers twice, carrying (n-1)/n of its share of the
    # buffer per all-gather and reduce-scatter; the channels leave the server from every GPU in turn, so on a
    # rail-optimised network each of the 8 NICs carries 1/8 of the crossing bytes
    ag = [e for e in dp.result.comm if e["communicator"] == "dpcp"]
    expected = sum(15 / 16 * e["size_bytes"] * e["calls_per_step"] for e in ag) / 8
    assert leaf.bytes_per_step == pytest.approx(expected)
    assert leaf.busy_s == pytest.approx(expected / leaf.bandwidth_Bps)
    assert leaf.share_of_step == pytest.approx(leaf.busy_s / dp.step_time_s)
    assert set(leaf.by) == {"dpcp"} and leaf.num_as_busy == 2 * 2 * 8  # both directions, both servers, 8 rails


def test_channel_rings_leave_each_server_from_another_gpu():
    from fabriclab.whatif.llm.links import channel_rings

    groups = np.arange(16).reshape(2, 8)
    rings = channel_rings(groups, 4, 3)
    assert rings.shape == (3, 2, 8)
    assert rings[1, 0].tolist() == [1, 2, 3, 0, 5, 6, 7, 4]
    exits = {int(r[3]) for r in rings[:, 0]}  # the last GPU of the first server in each channel
    assert exits == {3, 0, 1}
    assert (np.sort(rings, axis=2) == groups).all()
    # one GPU per server, or uneven groups: a single ring in rank order
    assert channel_rings(np.array([[0, 4, 8, 12]]), 4, 3).shape == (1, 1, 4)
    assert channel_rings(np.array([[0, 1, 2, 4]]), 4, 3).tolist() == [[[0, 1, 2, 4]]]
