"""Topologies, routing, link presets and node internals (GPUs, PCIe, NVLink, NIC) for the simulator.

Standard library and numpy only. A `Topology` is endpoints, host-internal nodes, switches and directed
links with bandwidth (B/s) and latency (s), plus vectorized routes; presets are functions:
`fat_tree`, `leaf_spine`, `star`, `ring`, `torus`, `flattened_butterfly`. `place()` maps ranks to
endpoints, `link_preset()` names link technologies, `fabriclab.fabric.simgrid` exports to SimGrid.

Try it: `python -c "from fabriclab.fabric import fat_tree; print(fat_tree(levels=2, hosts=512, bisection=0.25))"`.
"""

from fabriclab.fabric.analysis import bisection_bandwidth_Bps, max_flow_Bps
from fabriclab.fabric.fattree import FatTreeShape, fat_tree, leaf_spine, star
from fabriclab.fabric.hosts import HostModel, host_model
from fabriclab.fabric.links import LINK_PRESET_NAMES, Link, link_preset, parse_link, plain_link
from fabriclab.fabric.direct_networks import flattened_butterfly, ring, torus
from fabriclab.fabric.placement import PLACEMENTS, place
from fabriclab.fabric.routing import ROUTINGS
from fabriclab.fabric.topology import Router, Topology

__all__ = [
    "FatTreeShape", "HostModel", "LINK_PRESET_NAMES", "Link", "PLACEMENTS", "ROUTINGS", "Router", "Topology",
    "bisection_bandwidth_Bps", "fat_tree", "flattened_butterfly", "host_model", "leaf_spine", "link_preset",
    "max_flow_Bps", "parse_link", "place", "plain_link", "ring", "star", "torus",
]
