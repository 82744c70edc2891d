"""Topologies, routing, link presets and node internals (GPUs, PCIe, NVLink, NIC) for the simulator.

Standard library and numpy only. A `Topology` is endpoints, host-internal nodes, switches and directed
links with bandwidth (B/s) and latency (s), plus vectorized routes; presets are functions:
`fat_tree`, `leaf_spine`, `star`, `ring`, `torus`, `flattened_butterfly`. `place()` maps ranks to
endpoints, `link_preset()` names link technologies, `fabriclab.fabric.simgrid` exports to SimGrid.

Try it: `python -c "from fabriclab.fabric import fat_tree; print(fat_tree(levels=2, hosts=512, bisection=0.25))"`.
"""

from importlib import import_module

# Names load on first use (PEP 562), so a simulation that needs only fat trees skips the rest.
_WHERE = {
    "bisection_bandwidth_Bps": "analysis", "max_flow_Bps": "analysis",
    "FatTreeShape": "fattree", "fat_tree": "fattree", "leaf_spine": "fattree", "star": "fattree",
    "HostModel": "hosts", "host_model": "hosts",
    "LINK_PRESET_NAMES": "links", "Link": "links", "link_preset": "links", "parse_link": "links",
    "plain_link": "links",
    "flattened_butterfly": "direct_networks", "ring": "direct_networks", "torus": "direct_networks",
    "PLACEMENTS": "placement", "place": "placement",
    "ROUTINGS": "routing",
    "Router": "topology", "Topology": "topology",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"fabriclab.fabric.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'fabriclab.fabric' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "FatTreeShape", "HostModel", "LINK_PRESET_NAMES", "Link", "PLACEMENTS", "ROUTINGS", "Router", "Topology",
    "bisection_bandwidth_Bps", "fat_tree", "flattened_butterfly", "host_model", "leaf_spine", "link_preset",
    "max_flow_Bps", "parse_link", "place", "plain_link", "ring", "star", "torus",
]
