"""NVLink domains that span servers: how a job fills them, and the cluster its collectives see.

A GB200 / GB300 NVL72 rack is 18 compute trays of 4 GPUs (each tray a server: its CPUs, NICs and PCIe)
joined by NVLink switch trays into one NVLink domain of 72 GPUs (`server.gpus_per_domain`). Every GPU
reaches every other of its domain at the NVLink rate, through one switch hop, as inside an HGX server of
8. NCCL treats such a domain as one node from 2.20 (multi-node NVLink, MNNVL: NVIDIA/nccl#1159 "MNNVL
support in NCCL will first be available in NCCL 2.20.x"; the ranks of one NVLink clique share a node, so
its rings, trees, NVLS and PAT see the domain where they saw a server). So a collective is costed on the
*domain view* of the cluster: servers of the domain's GPUs, with the NICs of all its trays. Before 2.20
NCCL cannot use NVLink across trays: each tray is a node and the network joins them.

Placement fills domains first. A job whose GPUs are a multiple of the domain uses whole domains; one that
is not uses the largest number of whole trays per domain that divides it (4,096 GPUs on NVL72 racks: 64
GPUs, 16 of the 18 trays, in each of 64 racks; the two spare trays are how such racks are run, e.g. for
failover), and says so.

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c; from fabriclab.fabric.domains
import domain_view, placement_note; k = c('gb200-nvl72'); print(domain_view(k, 4096).server); print(placement_note(k, 4096))"`.
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.fabric.cluster import ClusterModel, ServerSpec

# NCCL release that runs collectives over NVLink across OS nodes (MNNVL), module doc.
MNNVL_NCCL = (2, 20)


def domain_size(server: ServerSpec) -> int:
    """GPUs of one NVLink domain (the server's own when it names none)."""
    return server.gpus_per_domain or server.gpus_per_server


def spans_servers(cluster: ClusterModel) -> bool:
    """True when the cluster's NVLink domain joins several servers (trays)."""
    return domain_size(cluster.server) > cluster.server.gpus_per_server


def nccl_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of an NCCL version such as `2.27.7`; None when the text is not one."""
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def library_spans_domain(cluster: ClusterModel) -> bool:
    """Whether the library uses NVLink across trays: NCCL from 2.20 (MNNVL); another library is taken to."""
    lib = cluster.library
    release = nccl_release(lib.nccl_version) if lib.name == "nccl" else None
    return release is None or release >= MNNVL_NCCL


def domain_gpus_used(cluster: ClusterModel, num_gpus: int | None) -> int:
    """GPUs of each NVLink domain a job of `num_gpus` uses (module doc; `server.domain_gpus_used` when the
    cluster gives it); a ValueError names the numbers."""
    s = cluster.server
    d, t = domain_size(s), s.gpus_per_server
    given = s.domain_gpus_used
    if given and d > t:
        if num_gpus is not None and num_gpus > given and num_gpus % given:
            raise ValueError(f"--gpus {num_gpus} on {cluster.name} at {given} GPUs of each NVLink domain of {d}: "
                             f"{num_gpus} is not a multiple of {given}; give --gpus {num_gpus // given * given or given}"
                             f" or {(num_gpus // given + 1) * given}, or another --domain-gpus")
        if num_gpus is None or num_gpus >= given:
            return given
    if num_gpus is None or num_gpus % d == 0:
        return d
    if num_gpus < d:
        if num_gpus > t and num_gpus % t:
            raise ValueError(f"--gpus {num_gpus} on {cluster.name}: the GPUs do not fill whole trays of {t} GPUs of "
                             f"its NVLink domain of {d}; use a multiple of {t} (e.g. {num_gpus // t * t} or "
                             f"{(num_gpus // t + 1) * t})")
        return num_gpus
    for used in range(d - d % t, 0, -t):
        if num_gpus % used == 0:
            return used
    raise ValueError(f"--gpus {num_gpus} on {cluster.name}: the GPUs do not fill whole trays of {t} GPUs of its NVLink "
                     f"domains of {d}; use a multiple of {t} (e.g. {num_gpus // t * t} or {(num_gpus // t + 1) * t}),"
                     f" or of {d} for whole domains")


def domain_view(cluster: ClusterModel, num_gpus: int | None = None) -> ClusterModel:
    """The cluster as the library sees it for a job of `num_gpus` GPUs: a "server" per NVLink domain (the
    GPUs the job uses in it, with those trays' NICs) when the library spans domains; else its trays. The
    view names no domain of its own, so taking it again changes nothing."""
    s = cluster.server
    if not spans_servers(cluster):
        return cluster
    if not library_spans_domain(cluster):
        text = (f"{cluster.description}; NCCL {cluster.library.nccl_version} predates multi-node NVLink (2.20): each "
                f"tray of {s.gpus_per_server} is a node to it, the network joins them")
        return replace(cluster, description=text, server=replace(s, gpus_per_domain=0, domain_gpus_used=0))
    used = domain_gpus_used(cluster, num_gpus)
    if used <= s.gpus_per_server:  # the job fits in one tray: the tray is all it sees
        return replace(cluster, server=replace(s, gpus_per_domain=0, domain_gpus_used=0))
    trays = used // s.gpus_per_server
    server = replace(s, gpus_per_server=used, nics_per_server=s.nics_per_server * trays, gpus_per_domain=0,
                     domain_gpus_used=0)
    return replace(cluster, server=server)


def with_domain_gpus(cluster: ClusterModel, used: int | None) -> ClusterModel:
    """The cluster with a job using `used` GPUs of each NVLink domain (`--domain-gpus`); None: unchanged. A
    ValueError names the numbers when they are not whole trays of the domain."""
    if used is None:
        return cluster
    s = cluster.server
    d, t = domain_size(s), s.gpus_per_server
    if d == t:
        raise ValueError(f"--domain-gpus {used}: cluster {cluster.name}'s NVLink domain is its server of {t} GPUs; "
                         f"the option is for domains that span trays (gb200-nvl72, gb300-nvl72)")
    if used < t or used > d or used % t:
        raise ValueError(f"--domain-gpus {used}: give whole trays of {t} GPUs of {cluster.name}'s NVLink domain of "
                         f"{d} ({', '.join(str(k) for k in range(t, d + 1, t) if d % k == 0 or k & (k - 1) == 0)}, ...)")
    return replace(cluster, server=replace(s, domain_gpus_used=used))


def power_of_two_use(cluster: ClusterModel) -> int:
    """The most GPUs of an NVLink domain in whole trays that is a power of two (64 of an NVL72's 72): the use
    that keeps power-of-two TP, EP and DP groups whole; 0 when there is none, or the domain is one."""
    s = cluster.server
    d, t = domain_size(s), s.gpus_per_server
    best = 1 << (d.bit_length() - 1)
    return best if d > t and best != d and best % t == 0 else 0


def placement_note(cluster: ClusterModel, num_gpus: int) -> str:
    """One line on how a job fills the cluster's NVLink domains; empty when servers are the domains."""
    s = cluster.server
    if not spans_servers(cluster):
        return ""
    d, t = domain_size(s), s.gpus_per_server
    if not library_spans_domain(cluster):
        return (f"NCCL {cluster.library.nccl_version} predates multi-node NVLink (2.20): each tray of {t} GPUs is a "
                f"node, the NVLink domain of {d} is not used across trays")
    used = domain_gpus_used(cluster, num_gpus)
    domains = max(1, num_gpus // used)
    if used == d:
        return f"{num_gpus} GPUs fill {domains} NVLink domain{'s' if domains > 1 else ''} of {d} ({d // t} trays of {t})"
    spare = (d - used) // t
    return (f"{num_gpus} GPUs as {used} of each NVLink domain's {d} ({used // t} of {d // t} trays of {t}; "
            f"{spare} tray{'s' if spare != 1 else ''} spare) in {domains} domain{'s' if domains > 1 else ''}")
