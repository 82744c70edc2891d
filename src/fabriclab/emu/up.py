"""Bring an emulated cluster up from a topology and how to emulate it, as `fabriclab emu up` does.

`emu_config` turns the emulation's settings (a fabric preset and its scale, or a dilation; the tbf
bucket and queue) into the spec and `EmuConfig` to build; `bring_up` checks what needs no root (the
spec, what tc can shape) before it builds the cluster under the emulator's lock; `up_record` is the
record of the cluster that is up.

Try it: `sudo fabriclab emu up --topology star --hosts 4 --preset 25gbe`.
"""

from __future__ import annotations

from fabriclab.emu import netns
from fabriclab.emu.cluster import EmuConfig, build_cluster, check_shaping, check_spec
from fabriclab.emu.presets import DEFAULT_SCALE, apply_preset
from fabriclab.emu.state import ClusterState, cluster_lock
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.fabric.topology import Topology


def emu_config(spec: TopologySpec, *, burst_s: float, queue_s: float, dilation: float | None = None,
               preset: str | None = None, scale: str | None = None,
               keep_latency: bool = False) -> tuple[TopologySpec, EmuConfig]:
    """The spec to build and how: with a `preset`, its link and the dilation 1/`scale` (the spec's latency
    stays when `keep_latency`); else the spec as it is at `dilation` (None: 1)."""
    if preset is not None:
        spec, dilation = apply_preset(spec, preset, scale or DEFAULT_SCALE,
                                      latency_s=spec.latency_s if keep_latency else None)
    return spec, EmuConfig(dilation=1.0 if dilation is None else dilation, burst_s=burst_s, queue_s=queue_s)


def bring_up(spec: TopologySpec, config: EmuConfig) -> tuple[Topology, ClusterState]:
    """Build the emulated cluster (anything stale is removed first): the topology and the cluster's state.
    Bad specs and unshapeable rates are refused before the system is touched."""
    check_spec(spec)
    topology = build_topology(spec)
    check_shaping(topology, config)
    netns.check_system()
    with cluster_lock():
        state = build_cluster(spec, config)
    return topology, state


def link_shapes(state: ClusterState) -> list[tuple[float, int, int]]:
    """The distinct (emulated rate B/s, tbf burst bytes, tbf limit bytes) of the cables' directions."""
    return sorted({(c.rate_Bps[e], c.burst_bytes[e], c.limit_bytes[e]) for c in state.links for e in (0, 1)})


def up_record(spec: TopologySpec, config: EmuConfig, state: ClusterState) -> tuple[dict, dict]:
    """(config, results) of the record of `emu up`."""
    return ({"topology": spec.as_dict(), "dilation": config.dilation, "burst_s": config.burst_s,
             "queue_s": config.queue_s},
            {"hosts": [h.__dict__ for h in state.hosts], "switches": list(state.switches),
             "routing": state.routing, "rtts": [list(r) for r in state.rtts],
             "hop_latency_s": state.hop_latency_s})
