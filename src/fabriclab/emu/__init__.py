"""Emulated cluster inside one Linux box: namespaces as hosts and switches, shaped veth cables, a launcher.

* `cluster`: `build_cluster` / `teardown_cluster` / `emulated_cluster` from a TopologySpec (routes follow
  `Topology.route()`, links shaped with tbf at bandwidth / dilation; latency is not emulated, only measured).
* `launch`: `run_in_cluster(argv)` runs one process per host with RANK, WORLD_SIZE, MASTER_ADDR, ...
* `state`: the state file (`/run/fabriclab/emu.json`) and the lock.
* `presets`: Samsi et al.'s fabrics (25 GbE RoCE, 100 Gb Omni-Path) at a scale; `undilate_time`.
* `netns`: the wrappers around `ip`, `tc` and setns(2).

Everything needs root and iproute2 except planning (`make_plan`), presets and the state dataclasses.

Try it: `sudo fabriclab emu up --topology star --hosts 3 --link 200Mbps && sudo fabriclab emu status`.
"""

from fabriclab.emu.cluster import EmuConfig, Plan, build_cluster, emulated_cluster, make_plan, teardown_cluster
from fabriclab.emu.launch import RankResult, ping_hosts, run_in_cluster
from fabriclab.emu.netns import EmuError, EmuUnavailable
from fabriclab.emu.presets import (FABRIC_PRESET_NAMES, apply_preset, fabric_preset, undilate_bandwidth,
                                   undilate_time)
from fabriclab.emu.state import ClusterState, EmuHost, EmuLink, load_state

__all__ = [
    "ClusterState", "EmuConfig", "EmuError", "EmuHost", "EmuLink", "EmuUnavailable", "FABRIC_PRESET_NAMES",
    "Plan", "RankResult", "apply_preset", "build_cluster", "emulated_cluster", "fabric_preset", "load_state",
    "make_plan", "ping_hosts", "run_in_cluster", "teardown_cluster", "undilate_bandwidth", "undilate_time",
]
