"""Export a Topology as a SimGrid platform (XML, version 4.1) to re-run a scenario in SimGrid.

Zhang, Li, Tanimura, Nakada simulated their fat trees in SimGrid; this writes the same networks so a result of `fabriclab.sim`
can be cross-checked there.

* **Fat trees** (`fat_tree`, and `leaf_spine` when uplinks equal host links), one endpoint per host, D-mod-K
  routing: a `<cluster topology="FAT_TREE" topo_parameters="L;m_1,..,m_L;w_1,..,w_L;p_1,..,p_L">`.
  SimGrid reads the four fields as levels; down-links (children) of each switch at level 1..L;
  up-links (parents) of each node at level 0..L-1; parallel cables between two related nodes (Zahavi's
  PGFT). Our 2-level tree of H hosts, k per leaf, bisection r is `2;k,H/k;1,k*r;1,1`: hosts have one
  parent (their leaf), leaves have k*r parents (the spines), spines have H/k children (every leaf).
  512 hosts, 16 per leaf, r = 1/4 give `2;16,32;1,4;1,1`. The 3-level tree (pods of p leaves) is
  `3;k,p,H/(k*p);1,k,p*r;1,1,1`: the bisection ratio lives in the last up-link count, as in `fattree.py`.
  Every cable is full duplex (`sharing_policy="SPLITDUPLEX"`) with the topology's bandwidth and per-link
  latency; SimGrid's FatTreeZone routes by D-mod-K like `routing.py`, so routes match link for link.
* **Star** (one endpoint per host): a flat `<cluster>` without backbone, i.e. a private full-duplex link
  per host into a non-blocking crossbar, exactly `star()`.
* **Anything else** (torus, flattened butterfly, ECMP, several GPUs per server, mixed link speeds): an
  explicit `<zone routing="Full">` with one `<host>` per endpoint, a `<router>` per other node, one
  `<link>` per directed link (`SHARED`) and one `<route symmetrical="NO">` per ordered endpoint pair with
  our route's links. It lists n*(n-1) routes, so it is refused above `max_routes`.

Hosts are named like our endpoints (`h0`, `h1`, ... or `h0.gpu0`, ...); `simgrid_hostfile()` lists them
in endpoint order. To re-run a scenario:

    python -c "from fabriclab.fabric import fat_tree; from fabriclab.fabric.simgrid import write_simgrid;
               write_simgrid(fat_tree(hosts=512, bisection=0.25, link_Bps=4e9, latency_s=0.2e-6),
                             'ft.xml', hostfile='hosts.txt')"
    smpicc -O2 allreduce.c -o allreduce        # any MPI program, compiled for SMPI
    smpirun -platform ft.xml -hostfile hosts.txt -np 512 ./allreduce

or load `ft.xml` in an S4U program (`simgrid::s4u::Engine e(&argc, argv); e.load_platform("ft.xml");`)
and start one actor per host `h0`..`h511` (rank r on `place(...)[r]`).

Try it: `python -c "from fabriclab.fabric import fat_tree; from fabriclab.fabric.simgrid import
to_simgrid_xml; print(to_simgrid_xml(fat_tree(hosts=64)))"`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from fabriclab.fabric.fattree import FatTreeRouter
from fabriclab.fabric.routing import DMODK
from fabriclab.fabric.topology import Topology

_HEADER = "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
# Full routing lists every ordered endpoint pair; beyond this the file gets unwieldy (~100 MB).
MAX_FULL_ROUTES = 100_000


def _bandwidth(value: float) -> str:
    return f"{value:.17g}Bps"


def _latency(value: float) -> str:
    return f"{value * 1e9:.12g}ns"


def fat_tree_parameters(topology: Topology) -> str | None:
    """The FAT_TREE `topo_parameters` of a fat tree SimGrid can build as a cluster, else None."""
    router = topology.router
    if not isinstance(router, FatTreeRouter) or router.shape.levels < 2:
        return None
    return router.shape.simgrid_parameters()


def _uniform(topology: Topology) -> bool:
    return (topology.gpus_per_server == 1 and np.ptp(topology.bandwidth_Bps) == 0
            and np.ptp(topology.latency_s) == 0)


def to_simgrid_xml(topology: Topology, *, speed: str = "1Gf", max_routes: int = MAX_FULL_ROUTES) -> str:
    """SimGrid platform XML (version 4.1) of `topology`; see the module doc for the forms it takes."""
    platform = ET.Element("platform", version="4.1")
    platform.append(ET.Comment(f" {topology.name}, exported by fabriclab "))
    zone = ET.SubElement(platform, "zone", id="world", routing="Full")
    router = topology.router
    if isinstance(router, FatTreeRouter) and router.routing == DMODK and _uniform(topology):
        attrs = dict(id="fabric", prefix="h", suffix="", radical=f"0-{topology.num_hosts - 1}", speed=speed,
                     bw=_bandwidth(topology.bandwidth_Bps[0]), lat=_latency(topology.latency_s[0]),
                     sharing_policy="SPLITDUPLEX")
        if router.shape.levels > 1:
            attrs.update(topology="FAT_TREE", topo_parameters=router.shape.simgrid_parameters())
        ET.SubElement(zone, "cluster", attrs)
    else:
        _full_zone(zone, topology, speed, max_routes)
    ET.indent(platform)
    return _HEADER + ET.tostring(platform, encoding="unicode") + "\n"


def _full_zone(zone: ET.Element, topology: Topology, speed: str, max_routes: int) -> None:
    n = topology.num_endpoints
    if n * (n - 1) > max_routes:
        raise ValueError(f"{topology.name} needs {n * (n - 1)} explicit routes in a Full SimGrid zone, "
                         f"over max_routes={max_routes}: export a D-mod-K fat tree or star with one GPU per "
                         f"host (written as a compact <cluster>), or a topology of at most "
                         f"{int((1 + (1 + 4 * max_routes) ** 0.5) / 2)} endpoints")
    names = topology.node_names
    for e in range(n):
        ET.SubElement(zone, "host", id=names[e], speed=speed)
    for node in range(n, topology.num_nodes):
        ET.SubElement(zone, "router", id=names[node])
    link_ids = [f"l{i}:{topology.link_name(i).replace('->', '-')}" for i in range(topology.num_links)]
    for i, link_id in enumerate(link_ids):
        ET.SubElement(zone, "link", id=link_id, bandwidth=_bandwidth(topology.bandwidth_Bps[i]),
                      latency=_latency(topology.latency_s[i]), sharing_policy="SHARED")
    src, dst = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    offsets, links = topology.routes(src, dst)
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        route = ET.SubElement(zone, "route", src=names[s], dst=names[d], symmetrical="NO")
        for link in links[offsets[i]:offsets[i + 1]].tolist():
            ET.SubElement(route, "link_ctn", id=link_ids[link])


def simgrid_hostfile(topology: Topology) -> str:
    """One SimGrid host name per line, in endpoint order (for `smpirun -hostfile`).

    Cluster hosts are `h0`..`h{H-1}`, the same names our endpoints carry when each host has one GPU."""
    return "\n".join(topology.node_names[:topology.num_endpoints]) + "\n"


def write_simgrid(topology: Topology, path: str | Path, *, hostfile: str | Path | None = None,
                  speed: str = "1Gf") -> Path:
    """Write the platform XML (and optionally the host file) and return the platform's path."""
    path = Path(path)
    path.write_text(to_simgrid_xml(topology, speed=speed))
    if hostfile is not None:
        Path(hostfile).write_text(simgrid_hostfile(topology))
    return path
