"""Root tests of the emulated cluster's life cycle: routes in the kernel equal Topology.route(), teardown
leaves nothing, and a cluster left by a killed driver or a SIGTERM is removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fabriclab.emu import netns
from fabriclab.emu.cluster import EmuConfig, build_cluster, emulated_cluster, make_plan, teardown_cluster
from fabriclab.emu.launch import ping_hosts
from fabriclab.emu.state import name_tag, private_state_path, state_path
from fabriclab.fabric.scenario import TopologySpec, build_topology

pytestmark = pytest.mark.root

STAR3 = TopologySpec(kind="star", hosts=3, bandwidth_Bps=200e6 / 8)
FAT_TREE4 = TopologySpec(kind="fat-tree", hosts=4, hosts_per_leaf=2, bisection=0.5, bandwidth_Bps=200e6 / 8)


def _kernel_route(plan, s: int, d: int) -> tuple[int, ...]:
    """Links a packet s -> d takes, asking each namespace's kernel (`ip route get`, with from/iif at switches)."""
    t, link_of = plan.topology, {(plan.namespaces[int(plan.topology.link_src[l])], plan.iface[l]): l
                                 for l in range(plan.topology.num_links)}
    node, walk, iif = s, [], None
    while node != d and len(walk) <= t.num_links:
        extra = [] if iif is None else ["from", plan.addresses[s], "iif", iif]
        got = json.loads(netns.ip("-j", "route", "get", plan.addresses[d], *extra, ns=plan.namespaces[node]))[0]
        link = link_of[(plan.namespaces[node], got["dev"])]
        assert got["gateway"] == plan.addresses[int(t.link_dst[link])]
        walk.append(link)
        iif = plan.iface[_reverse(t, link)]
        node = int(t.link_dst[link])
    return tuple(walk)


def _reverse(t, link: int) -> int:
    return next(l for l in range(t.num_links)
                if t.link_src[l] == t.link_dst[link] and t.link_dst[l] == t.link_src[link])


def test_fat_tree_routes_follow_topology_and_teardown_leaves_nothing(emu_root):
    topo = build_topology(FAT_TREE4)
    tag = name_tag(private_state_path())  # the names of this process's own cluster (emulated_cluster)
    plan = make_plan(topo, EmuConfig(), tag=tag)
    with emulated_cluster(FAT_TREE4) as state:
        assert state.routing == "destination" and len(state.switches) == 3
        for rank, hops, rtts in ping_hosts(state, topo, count=2):
            assert hops == len(topo.route(0, rank)) and None not in rtts
        for node, ns in enumerate(plan.namespaces):
            table = json.loads(netns.ip("-j", "route", "show", ns=ns))
            want = [line.split()[2:7:2] for line in plan.ip_lines(node) if line.startswith("route add")]
            assert sorted([r["dst"] + "/32", r["gateway"], r["dev"]] for r in table) == sorted(want)
        for s in range(topo.num_endpoints):
            for d in range(topo.num_endpoints):
                if s != d:
                    assert _kernel_route(plan, s, d) == topo.route(s, d), (s, d)
    assert netns.our_namespaces(tag) == [] and netns.our_root_links(tag) == []
    assert not private_state_path().exists()


def test_ecmp_routes_need_policy_rules_and_still_follow_topology(emu_root):
    spec = TopologySpec(kind="fat-tree", hosts=8, hosts_per_leaf=2, routing="ecmp", bandwidth_Bps=200e6 / 8)
    topo = build_topology(spec)
    plan = make_plan(topo, EmuConfig(), tag=name_tag(private_state_path()))
    with emulated_cluster(spec, config=EmuConfig(measure_rtt=False)) as state:
        assert state.routing == "source"
        pairs = [(s, d) for s in range(topo.num_endpoints) for d in range(topo.num_endpoints) if s != d]
        assert [_kernel_route(plan, s, d) for s, d in pairs] == [topo.route(s, d) for s, d in pairs]


def test_oversubscribed_uplink_is_shared_by_the_flows_crossing_it(emu_root, tcp_goodput):
    # Bisection 1/2 with 2 hosts per leaf: one spine, so h0->h2 and h1->h3 share leaf0->spine0.
    with emulated_cluster(FAT_TREE4, config=EmuConfig(measure_rtt=False)) as state:
        shared = tcp_goodput(state, [(0, 2), (1, 3)], seconds=1.5)
    payload_bps = 200e6 * 1448 / 1514
    print(f"two flows over one 200 Mbit/s uplink: {shared[0] / 1e6:.1f} + {shared[1] / 1e6:.1f} Mbit/s")
    assert sum(shared) == pytest.approx(payload_bps, rel=0.03)
    assert min(shared) > 0.25 * payload_bps


_KILLED_DRIVER = """
import os, subprocess
from fabriclab.emu.cluster import build_cluster
from fabriclab.fabric.scenario import TopologySpec
build_cluster(TopologySpec(kind="fat-tree", hosts=4, hosts_per_leaf=2, bisection=0.5, bandwidth_Bps=200e6 / 8))
child = subprocess.Popen(["ip", "netns", "exec", "flh3", "sleep", "600"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def _gone(pid: int, wait_s: float = 3.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_stale_cluster_of_a_killed_driver_is_removed_by_up_and_down(emu_locked):
    done = subprocess.run([sys.executable, "-c", _KILLED_DRIVER], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    sleeper = int(done.stdout.split()[0])
    assert len(netns.our_namespaces()) == 7 and not _gone(sleeper, 0.1)
    # The next `up` (another topology) removes the stale one first, including what ran inside it.
    state = build_cluster(STAR3, EmuConfig(measure_rtt=False))
    assert netns.our_namespaces() == list(state.namespaces) == ["flh0", "flh1", "flh2", "fls0"]
    assert _gone(sleeper)
    # `down` from a fresh call without any state file still removes everything.
    state_path().unlink()
    assert teardown_cluster() == ["flh0", "flh1", "flh2", "fls0"]
    assert netns.our_namespaces() == [] and "flh0" not in netns.list_netns()


_SIGTERMED = """
import time
from fabriclab.emu.cluster import emulated_cluster
from fabriclab.fabric.scenario import TopologySpec
with emulated_cluster(TopologySpec(kind="star", hosts=2, bandwidth_Bps=200e6 / 8)):
    print("up", flush=True)
    time.sleep(60)
"""


def test_sigterm_tears_the_context_managers_cluster_down(emu_root):
    proc = subprocess.Popen([sys.executable, "-c", _SIGTERMED], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        tag = name_tag(private_state_path(proc.pid))
        assert netns.our_namespaces(tag) == [f"fl{tag}h0", f"fl{tag}h1", f"fl{tag}s0"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert netns.our_namespaces(tag) == [] and not private_state_path(proc.pid).exists()
