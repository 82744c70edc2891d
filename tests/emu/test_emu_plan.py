"""Tests of the emulator that need no root: the plan (names, addresses, shaping, routes), presets, the state
file, the launcher's environment and exit codes (the CLI's one-line errors: tests/cli/test_cli_emu_errors.py)."""

from __future__ import annotations

import json

import pytest

from fabriclab.emu import netns
from fabriclab.emu.cluster import MIN_BURST_BYTES, EmuConfig, make_plan, shaping
from fabriclab.emu.launch import RankResult, exit_code, first_failure, hop_latency, rank_env
from fabriclab.emu.presets import (apply_preset, emulated_rate_Bps, fabric_preset, undilate_bandwidth,
                                   undilate_time)
from fabriclab.emu.state import (ClusterState, EmuHost, default_state_path, load_state, name_tag, private_state_path,
                                 save_state, state_path)
from fabriclab.fabric.links import LINK_PRESET_NAMES
from fabriclab.fabric.scenario import TopologySpec, build_topology

SPECS = {
    "star3": TopologySpec(kind="star", hosts=3, bandwidth_Bps=200e6 / 8),
    "fat-tree4": TopologySpec(kind="fat-tree", hosts=4, hosts_per_leaf=2, bisection=0.5, bandwidth_Bps=1e9 / 8),
    "fat-tree8": TopologySpec(kind="fat-tree", hosts=8, hosts_per_leaf=4, bisection=0.5, bandwidth_Bps=1e9 / 8),
    "fat-tree3l": TopologySpec(kind="fat-tree", levels=3, hosts=16, hosts_per_leaf=2, leaves_per_pod=2,
                               bisection=0.5, bandwidth_Bps=1e9 / 8),
    "ecmp": TopologySpec(kind="fat-tree", hosts=8, hosts_per_leaf=2, routing="ecmp", bandwidth_Bps=1e9 / 8),
    "ring5": TopologySpec(kind="ring", hosts=5, bandwidth_Bps=1e9 / 8),
    "torus2x3": TopologySpec(kind="torus", dims=(2, 3), bandwidth_Bps=1e9 / 8),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_routes_follow_topology_route(name):
    topo = build_topology(SPECS[name])
    plan = make_plan(topo, EmuConfig())
    for s in range(topo.num_endpoints):
        for d in range(topo.num_endpoints):
            node, walk = s, []
            while node != d and len(walk) <= topo.num_links:
                link = plan.next_link(node, s, d)
                walk.append(link)
                node = int(topo.link_dst[link])
            assert tuple(walk) == topo.route(s, d), (s, d)


def test_destination_routing_for_dmodk_and_policy_rules_only_where_needed():
    assert make_plan(build_topology(SPECS["fat-tree8"]), EmuConfig()).routing == "destination"
    plan = make_plan(build_topology(SPECS["ecmp"]), EmuConfig())
    assert plan.routing == "source"
    rules = [line for node in range(plan.topology.num_nodes) for line in plan.ip_lines(node)
             if line.startswith("rule add")]
    assert rules and all(" lookup 10" in rule for rule in rules)


def test_names_addresses_and_lines():
    plan = make_plan(build_topology(SPECS["fat-tree8"]), EmuConfig())
    assert plan.namespaces[:8] == tuple(f"flh{i}" for i in range(8))
    assert plan.namespaces[8:] == ("fls0", "fls1", "fls2", "fls3")
    assert all(netns.OUR_NAME.match(name) for name in plan.namespaces + plan.iface)
    assert max(map(len, plan.iface)) <= netns.IFNAME_MAX
    assert len(set(plan.addresses)) == len(plan.addresses)
    assert plan.addresses[0] == "10.77.0.1" and plan.addresses[8] == "10.77.128.1"
    host0 = plan.ip_lines(0)
    assert "addr add 10.77.0.1/32 dev fls0" in host0
    assert "route add 10.77.0.8/32 via 10.77.128.1 dev fls0 onlink" in host0
    assert len(plan.links) == 12 and all(line.startswith("qdisc add dev") for line in plan.tc_lines(8))


def test_shaping_divides_by_dilation_with_documented_burst_and_limit():
    plan = make_plan(build_topology(SPECS["fat-tree4"]), EmuConfig(dilation=4))
    link = plan.links[0]
    assert link.rate_Bps == (1e9 / 8 / 4, 1e9 / 8 / 4)
    assert link.burst_bytes[0] == MIN_BURST_BYTES  # 31.25 MB/s * 2 ms < 128 KiB
    assert link.limit_bytes[0] == 312_500  # 10 ms at 31.25 MB/s > 2 * 128 KiB
    assert shaping(250e6, EmuConfig()) == (500_000, 2_500_000)  # 2 Gbit/s: 2 ms and 10 ms of traffic
    assert f"rate {round(1e9 / 4)}bit burst {MIN_BURST_BYTES} " in plan.tc_lines(0)[0]


def test_plan_and_config_reject_what_cannot_be_emulated():
    with pytest.raises(ValueError, match="gpus_per_server 1"):
        make_plan(build_topology(TopologySpec(kind="star", hosts=2, gpus_per_server=2)), EmuConfig())
    with pytest.raises(ValueError, match="fewer --hosts"):
        make_plan(build_topology(TopologySpec(kind="star", hosts=600)), EmuConfig())
    with pytest.raises(ValueError, match="D >= 1"):
        EmuConfig(dilation=0.5)


def test_presets_scale_the_papers_fabrics():
    assert {fabric_preset(name).link for name in ("25gbe", "100g-opa")} <= set(LINK_PRESET_NAMES)
    assert emulated_rate_Bps("25gbe") * 8 == pytest.approx(250e6)
    assert emulated_rate_Bps("100G-OPA") * 8 == pytest.approx(1e9)
    spec, dilation = apply_preset(TopologySpec(kind="star", hosts=4, bandwidth_Bps=1e9 / 8, latency_s=1e-6),
                                  "25gbe", "1/100")
    assert (spec.link, spec.bandwidth_Bps, spec.latency_s, dilation) == ("25GbE", 25e9 / 8, 0.3e-6,
                                                                          pytest.approx(100))
    kept, _ = apply_preset(TopologySpec(kind="star", hosts=4), "25gbe", "1/100", latency_s=1e-6)
    assert kept.latency_s == 1e-6
    plan = make_plan(build_topology(spec), EmuConfig(dilation=dilation))
    assert plan.links[0].rate_Bps[0] * 8 == pytest.approx(250e6)
    assert undilate_time(2.0, 100) == 0.02 and undilate_bandwidth(1e6, 100) == 1e8
    with pytest.raises(ValueError, match="25gbe, 100g-opa"):
        fabric_preset("10gbe")


def test_a_state_file_names_its_cluster_and_no_other(tmp_path, monkeypatch):
    monkeypatch.delenv("FABRICLAB_EMU_STATE", raising=False)
    assert name_tag() == name_tag(default_state_path()) == ""  # the default cluster keeps flh0, fls0, ...
    mine, other = name_tag(tmp_path / "a.json"), name_tag(tmp_path / "b.json")
    assert len(mine) == 5 and mine != other and mine == name_tag(tmp_path / "x" / ".." / "a.json")
    monkeypatch.setenv("FABRICLAB_EMU_STATE", str(tmp_path / "a.json"))
    assert name_tag() == mine and private_state_path(7) == tmp_path / "a-7.json"
    plan = make_plan(build_topology(SPECS["fat-tree3l"]), EmuConfig(), tag=mine)
    assert plan.namespaces[0] == f"fl{mine}h0" and plan.namespaces[-1].startswith(f"fl{mine}s")
    names = plan.namespaces + plan.iface
    assert all(netns.OUR_NAME.match(n) and netns.cluster_names(mine).match(n) for n in names)
    # Teardown of another cluster, or of the default one, matches none of these names.
    assert not any(netns.cluster_names(other).match(n) or netns.cluster_names("").match(n) for n in names)
    assert not netns.cluster_names(mine).match("flh0") and netns.OUR_NAME.match("flh0")
    assert max(map(len, names)) <= netns.IFNAME_MAX


def test_the_largest_tagged_cluster_still_has_interface_names_linux_takes():
    spec = TopologySpec(kind="fat-tree", hosts=256, hosts_per_leaf=2, bisection=1, bandwidth_Bps=1e9 / 8)
    plan = make_plan(build_topology(spec), EmuConfig(), tag="abcde")
    assert len(plan.namespaces) > 256 and max(map(len, plan.iface)) <= netns.IFNAME_MAX


def _state(num_hosts: int = 3) -> ClusterState:
    hosts = tuple(EmuHost(rank=r, namespace=f"flh{r}", ip=f"10.77.0.{r + 1}", iface="fls0")
                  for r in range(num_hosts))
    plan = make_plan(build_topology(SPECS["star3"]), EmuConfig(dilation=2))
    return ClusterState(spec=SPECS["star3"].as_dict(), dilation=2.0, hosts=hosts, switches=("fls0",),
                        links=plan.links, rtts=((1, 2, 1e-5),), hop_latency_s=2.5e-6)


def test_state_round_trip_and_stale_files(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICLAB_EMU_STATE", str(tmp_path / "emu.json"))
    assert state_path() == tmp_path / "emu.json" and load_state() is None
    state = _state()
    save_state(state)
    again = load_state()
    assert again == state and again.topology_spec() == SPECS["star3"]
    (tmp_path / "emu.json").write_text(json.dumps({"version": 0}))
    assert load_state() is None
    (tmp_path / "emu.json").write_text("{not json")
    assert load_state() is None


def test_rank_env_and_exit_codes():
    env = rank_env(_state(), 2, 29511, base={"PATH": "/bin"})
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "3" and env["LOCAL_RANK"] == "0"
    assert env["LOCAL_WORLD_SIZE"] == "1" and env["MASTER_ADDR"] == "10.77.0.1"
    assert env["MASTER_PORT"] == "29511" and env["FABRICLAB_EMU_DILATION"] == "2"
    assert env["GLOO_SOCKET_IFNAME"] == "fls0" and env["PATH"] == "/bin"

    def result(rank, code, status, elapsed):
        return RankResult(rank=rank, namespace=f"flh{rank}", returncode=code, status=status,
                          elapsed_s=elapsed, output="")

    ok = [result(0, 0, "ok", 1.0), result(1, 0, "ok", 1.0)]
    assert first_failure(ok) is None and exit_code(ok) == 0
    bad = [result(0, -15, "killed", 2.0), result(1, 3, "failed", 1.5), result(2, 4, "failed", 0.5)]
    assert first_failure(bad).rank == 2 and exit_code(bad) == 4
    assert exit_code([result(0, -9, "failed", 1.0)]) == 137


def test_hop_latency_is_half_the_slope_over_links():
    assert hop_latency(((1, 2, 10e-6), (2, 4, 14e-6))) == pytest.approx(1e-6)
    assert hop_latency(((1, 2, 8e-6),)) == pytest.approx(2e-6)
    assert hop_latency(()) is None
