"""Root tests of `emu.cluster` on one star of 3 hosts kept up for the module: reachability and the rate
accuracy of the tbf shaping (a TCP transfer between two namespaces)."""

from __future__ import annotations

import json

import pytest

from fabriclab.emu import netns
from fabriclab.emu.cluster import emulated_cluster
from fabriclab.emu.launch import ping_hosts
from fabriclab.emu.state import load_state, name_tag, private_state_path
from fabriclab.fabric.scenario import TopologySpec

pytestmark = pytest.mark.root

STAR3 = TopologySpec(kind="star", hosts=3, bandwidth_Bps=200e6 / 8)
RATE_BPS = 200e6
# TCP payload per 1500 B frame with timestamps, over the frame as tbf counts it (no preamble/FCS).
PAYLOAD_SHARE = 1448 / 1514


@pytest.fixture(scope="module")
def star3(emu_root):
    with emulated_cluster(STAR3) as state:
        yield state


def test_star_is_reachable_and_shaped(star3):
    # A program's cluster has a state file of its own, and its names carry that file's tag.
    tag = name_tag(private_state_path())
    assert len(tag) == 5 and netns.our_namespaces(tag) == list(star3.namespaces)
    assert star3.namespaces == (f"fl{tag}h0", f"fl{tag}h1", f"fl{tag}h2", f"fl{tag}s0")
    for rank, hops, rtts in ping_hosts(star3, count=3):
        assert hops == 2 and all(r is not None and r < 0.05 for r in rtts), (rank, rtts)
    assert len(star3.rtts) == 2 and star3.hop_latency_s is not None
    host0 = star3.hosts[0]
    assert host0.iface == star3.switches[0]  # a veth end is named after the namespace at its other end
    qdisc = json.loads(netns.run(["tc", "-n", host0.namespace, "-j", "qdisc", "show", "dev", host0.iface]))[0]
    assert qdisc["kind"] == "tbf" and qdisc["options"]["rate"] == RATE_BPS / 8
    assert load_state(private_state_path()) == star3


def test_shaped_link_holds_its_rate(star3, tcp_goodput):
    (goodput,) = tcp_goodput(star3, [(0, 1)], seconds=2.0)
    print(f"asked {RATE_BPS / 1e6:g} Mbit/s: TCP goodput {goodput / 1e6:.2f} Mbit/s, expected "
          f"{RATE_BPS * PAYLOAD_SHARE / 1e6:.2f} (payload share {PAYLOAD_SHARE:.4f} of the frames tbf counts)")
    assert goodput == pytest.approx(RATE_BPS * PAYLOAD_SHARE, rel=0.03)
