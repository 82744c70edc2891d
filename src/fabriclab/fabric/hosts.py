"""Inside a host: GPUs (the endpoints), a PCIe switch, optional NVLink, and the NIC to the fabric.

With `gpus_per_server == 1` the endpoint *is* the host: its NIC link goes straight to the fabric and there
are no host-internal nodes. With `gpus_per_server = G > 1` every host h has

* G endpoints `h{h}.gpu{g}` (endpoint e = h*G + g), each linked to the host's PCIe switch `h{h}.pcie`
  by a PCIe link (default PCIe 3.0 x16, the GPU servers of that era);
* optionally an NVLink switch `h{h}.nvsw` (an NVSwitch, or the aggregate of a GPU's direct NVLinks) with
  one NVLink per GPU at the preset's per-GPU per-direction bandwidth;
* one NIC link from `h{h}.pcie` to the fabric: all GPUs of a host share it.

GPUs of one host talk over NVLink when there is one, else over PCIe (GPU -> pcie -> GPU: two links);
traffic to other hosts always leaves through PCIe and the NIC. `NetBuilder` lays out the node and link
ids the routers compute with: endpoints first, then host-internal nodes, then switches; intra-host links
first (2e / 2e+1 for GPU e to / from PCIe, then 2E+2e / 2E+2e+1 to / from NVLink), then the fabric.

Try it: `python -c "from fabriclab.fabric import star; print(star(hosts=2, gpus_per_server=4).link_name(0))"`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabriclab.fabric.links import Link, link_preset, parse_link


@dataclass(frozen=True, kw_only=True)
class HostModel:
    """How the endpoints of one host connect to each other and to the host's NIC."""

    gpus_per_server: int = 1
    """Endpoints (GPUs, ranks) per host; 1 means the host itself is the endpoint."""
    pcie: Link = field(default_factory=lambda: link_preset("PCIe3x16"))
    """Link between each GPU and the host's PCIe switch (used only when gpus_per_server > 1)."""
    nvlink: Link | None = None
    """Per-GPU NVLink to an NVLink switch, for traffic between GPUs of one host; None: they use PCIe."""

    def __post_init__(self) -> None:
        if not isinstance(self.gpus_per_server, (int, np.integer)) or self.gpus_per_server < 1:
            raise ValueError(f"gpus_per_server={self.gpus_per_server!r}: give a whole number >= 1")


def host_model(gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16",
               nvlink: Link | str | None = None) -> HostModel:
    """A `HostModel` from preset names or links, e.g. `host_model(8, 'PCIe4x16', 'NVLink-A100')`."""
    return HostModel(gpus_per_server=gpus_per_server, pcie=parse_link(pcie),
                     nvlink=None if nvlink is None else parse_link(nvlink))


class NetBuilder:
    """Collects nodes and full-duplex links in the id order the routers rely on (see module doc)."""

    def __init__(self, num_hosts: int, host: HostModel) -> None:
        if not isinstance(num_hosts, (int, np.integer)) or num_hosts < 1:
            raise ValueError(f"hosts={num_hosts!r}: give a whole number of hosts >= 1")
        self.num_hosts = int(num_hosts)
        self.host = host
        g = host.gpus_per_server
        self.num_endpoints = self.num_hosts * g
        if g == 1:
            self.names = [f"h{h}" for h in range(self.num_hosts)]
        else:
            self.names = [f"h{h}.gpu{i}" for h in range(self.num_hosts) for i in range(g)]
            self.names += [f"h{h}.pcie" for h in range(self.num_hosts)]
            if host.nvlink is not None:
                self.names += [f"h{h}.nvsw" for h in range(self.num_hosts)]
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._bw: list[np.ndarray] = []
        self._lat: list[np.ndarray] = []
        self.num_links = 0
        if g > 1:
            endpoints = np.arange(self.num_endpoints)
            self.add_duplex(endpoints, self.num_endpoints + endpoints // g, host.pcie)
            if host.nvlink is not None:
                self.add_duplex(endpoints, self.num_endpoints + self.num_hosts + endpoints // g, host.nvlink)
        self.num_intra_links = self.num_links

    def port(self, hosts: np.ndarray) -> np.ndarray:
        """Node where host h meets the fabric: the endpoint itself, or the host's PCIe switch."""
        hosts = np.asarray(hosts, dtype=np.int64)
        return hosts if self.host.gpus_per_server == 1 else self.num_endpoints + hosts

    def add_nodes(self, names: list[str]) -> int:
        """Append switch (or router) nodes; returns the id of the first."""
        first = len(self.names)
        self.names += names
        return first

    def add_duplex(self, a: np.ndarray, b: np.ndarray, link: Link,
                   *, bandwidth_Bps: np.ndarray | None = None) -> int:
        """Links a[i] -> b[i] (id first + 2i) and b[i] -> a[i] (first + 2i + 1); returns first."""
        a, b = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
        first, n = self.num_links, a.size
        self._src.append(np.stack([a.ravel(), b.ravel()], axis=1).ravel())
        self._dst.append(np.stack([b.ravel(), a.ravel()], axis=1).ravel())
        bw = np.full(n, link.bandwidth_Bps) if bandwidth_Bps is None else np.asarray(bandwidth_Bps, float)
        self._bw.append(np.repeat(bw, 2))
        self._lat.append(np.full(2 * n, link.latency_s))
        self.num_links += 2 * n
        return first

    def arrays(self) -> dict:
        """The Topology fields this builder collected."""
        def cat(parts, dtype):
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
        return dict(num_hosts=self.num_hosts, gpus_per_server=self.host.gpus_per_server,
                    node_names=tuple(self.names), link_src=cat(self._src, np.int64),
                    link_dst=cat(self._dst, np.int64), bandwidth_Bps=cat(self._bw, np.float64),
                    latency_s=cat(self._lat, np.float64))


@dataclass(frozen=True, kw_only=True)
class HostLinks:
    """Link-id arithmetic for the intra-host part of routes (what `NetBuilder` laid out)."""

    gpus_per_server: int
    """Endpoints per host."""
    num_endpoints: int
    """All endpoints of the topology."""
    has_nvlink: bool
    """Whether GPUs of one host talk over NVLink (else over PCIe)."""

    @classmethod
    def of(cls, builder: NetBuilder) -> "HostLinks":
        return cls(gpus_per_server=builder.host.gpus_per_server, num_endpoints=builder.num_endpoints,
                   has_nvlink=builder.host.nvlink is not None)

    def first_column(self, src: np.ndarray, cross: np.ndarray, same_host: np.ndarray) -> np.ndarray:
        """GPU -> PCIe for pairs leaving the host, GPU -> local switch for same-host pairs, else -1."""
        local = 2 * src + (2 * self.num_endpoints if self.has_nvlink else 0)
        return np.where(cross, 2 * src, np.where(same_host, local, -1))

    def last_column(self, dst: np.ndarray, cross: np.ndarray, same_host: np.ndarray) -> np.ndarray:
        """PCIe -> GPU for pairs arriving from the fabric, local switch -> GPU for same-host pairs."""
        local = 2 * dst + 1 + (2 * self.num_endpoints if self.has_nvlink else 0)
        return np.where(cross, 2 * dst + 1, np.where(same_host, local, -1))
