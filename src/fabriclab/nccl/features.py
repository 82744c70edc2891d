"""What NCCL can run on a cluster, by release: its algorithms, and where each applies inside and across an
NVLink domain.

Each feature names the release that introduced it and where that is written; `nccl/versions.py` holds the
tuning tables those releases cost them with, `nccl/choice.py` picks among them per size, and
`fabric/domains.py` decides whether an NVLink domain across trays is one node (multi-node NVLink).

| feature | from | where it runs |
|---|---|---|
| ring | 1.x | every collective, inside a server and across |
| tree | 2.4 | allreduce across nodes (double binary tree; NCCL 2.4 release notes) |
| CollNet | 2.6.4 | allreduce with SHARP in the network switches (2.6.4: "in-network collectives (beta)") |
| NVLS | 2.17 | allreduce, allgather, reduce_scatter inside a node: NVLink SHARP, the NVSwitch reduces (sm90+, NCCL 2.17.1) |
| NVLS-tree | 2.18 | allreduce across nodes: NVLS inside, a tree between nodes (NCCL 2.18.1: "NVLink SHARP + Tree") |
| MNNVL | 2.20 | an NVLink domain across trays (GB200 NVL72) is one node: NVLS and rings over its NVLink (NVIDIA/nccl#1159) |
| PAT | 2.23 | allgather / reduce_scatter at one GPU per node (NCCL 2.23.4 release notes: "PAT algorithm") |

So on an NVL72 rack with NCCL 2.27 a job's collectives inside one rack run NVLS (or rings on NVLink), those
across racks NVLS-tree or tree for allreduce and ring (PAT at one GPU per rack) for allgather and
reduce_scatter, and all-to-all is point-to-point, over NVLink inside a rack and the NICs across.

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c; from fabriclab.nccl.features
import feature_lines; print(chr(10).join(feature_lines(c('gb200-nvl72'))))"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.domains import MNNVL_NCCL, domain_size, library_spans_domain, nccl_release, spans_servers
from fabriclab.nccl.versions import compute_capability


@dataclass(frozen=True)
class Feature:
    """One thing NCCL can run, the release that introduced it and where."""

    name: str
    since: tuple[int, int]
    where: str
    source: str


FEATURES = (
    Feature("ring", (1, 0), "every collective, inside a node and across", "NCCL 1"),
    Feature("tree", (2, 4), "allreduce across nodes", "NCCL 2.4 release notes (double binary trees)"),
    Feature("collnet", (2, 6), "allreduce with SHARP in the network", "NCCL 2.6.4 release notes"),
    Feature("nvls", (2, 17), "allreduce, allgather, reduce_scatter inside a node (the NVSwitch reduces; sm90+)",
            "NCCL 2.17.1 release notes"),
    Feature("nvls_tree", (2, 18), "allreduce across nodes: NVLS inside, a tree between",
            "NCCL 2.18.1 release notes"),
    Feature("mnnvl", MNNVL_NCCL, "an NVLink domain across trays as one node", "NVIDIA/nccl#1159"),
    Feature("pat", (2, 23), "allgather / reduce_scatter at one GPU per node", "NCCL 2.23.4 release notes"),
)


def features_of(version: str) -> tuple[Feature, ...]:
    """The features NCCL `version` has (`2.18.3` has ring, tree, collnet, nvls, nvls_tree)."""
    v = nccl_release(version) or (0, 0)
    return tuple(f for f in FEATURES if f.since <= v)


def feature_lines(cluster: ClusterModel) -> list[str]:
    """What the cluster's library runs inside and across its NVLink domains, in words, one line each."""
    lib = cluster.library
    if lib.name != "nccl":
        return [f"{lib.name}: {', '.join(lib.algorithms)} (not NCCL: no NVLS, no multi-node NVLink)"]
    have = {f.name for f in features_of(lib.nccl_version)}
    missing = [f for f in FEATURES if f.name not in have]
    d, t = domain_size(cluster.server), cluster.server.gpus_per_server
    node = f"NVLink domain of {d}" if spans_servers(cluster) else f"server of {t}"
    if spans_servers(cluster) and not library_spans_domain(cluster):
        node = f"tray of {t} (the domain of {d} needs MNNVL, 2.20)"
    cc = compute_capability(cluster.server.gpu_name)
    nvls = "nvls" in have and cluster.server.intra == "nvswitch" and cc is not None and cc >= 90
    lines = [f"NCCL {lib.nccl_version}: a node is {'an' if node.startswith('NVLink') else 'a'} {node}",
             f"inside a node: ring{', NVLS (2.17+: the NVSwitch reduces)' if nvls else ''}",
             "across nodes: ring, tree (allreduce)" + (", NVLS-tree (2.18+)" if "nvls_tree" in have and nvls else "")
             + (", PAT at one GPU per node (2.23+)" if "pat" in have else "")
             + (", CollNet with SHARP" if cluster.network.sharp else "")]
    if missing:
        lines.append("not in this release: " + ", ".join(f"{f.name} ({'.'.join(map(str, f.since))})" for f in missing))
    return lines
