"""Link presets: what one cable (or one on-board interconnect) carries per direction, and its latency.

A `Link` is a bandwidth in bytes per second **per direction** (every link is full duplex; a topology
turns one `Link` into two directed links), a per-hop latency and an optional protocol efficiency.

* **Bandwidth** is the data rate after line coding, as the standard names it: 100GbE is 100e9 bit/s =
  12.5e9 B/s, PCIe 3.0 x16 is 8 GT/s * 16 lanes * 128/130 = 15.75e9 B/s.
* **Latency** is a per-link (per-hop) figure: the port-to-port latency of a typical switch of that
  technology from vendor data sheets (plus a few ns of cable), so a host-to-host path through one switch
  crosses two links. NIC and software overheads are not in the link: a cost model adds them per message.
* **Efficiency** is the share of the bandwidth left for payload after framing and headers (e.g. 0.94 for
  TCP over Ethernet with a 1500 B MTU). It is OFF by default: `effective_bandwidth()` returns the raw
  rate, `effective_bandwidth(use_efficiency=True)` the payload rate.

A link is named by a preset (`link_preset("EDR")`) or given as plain bandwidth and latency
(`parse_link("4GB/s@0.2us")`, the base case of the fat-tree study of Zhang, Li, Tanimura, Nakada).

Try it: `python -c "from fabriclab.fabric.links import link_preset; print(link_preset('100GbE'))"`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabriclab.units import parse_bandwidth, parse_time

# Payload share of Ethernet with TCP/IPv4 and a 1500 B MTU: 1448 B of payload per 1538 B on the wire
# (1500 + 14 header + 4 FCS + 8 preamble + 12 inter-frame gap; 52 B of IP+TCP+timestamp headers).
_ETH_TCP = 1448 / 1538
# RoCEv2 with a 4096 B MTU: 4096 / (4096 + 18 Eth+FCS + 20 IP + 8 UDP + 12 BTH + 4 ICRC + 20 preamble/IFG).
_ROCE = 4096 / 4178
# InfiniBand with a 4096 B MTU: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 B of headers per packet (IBTA spec).
_IB = 4096 / 4122
# Omni-Path link transfer packets: 16 flits of 65 bits + 14-bit CRC + 2 credit bits = 1056 bits per
# 1024 data bits (Birrittella et al., "Intel Omni-Path Architecture", Hot Interconnects 2015).
_OPA = 1024 / 1056
# PCIe with a 256 B max payload: 16 B TLP header + 2 B sequence + 4 B LCRC + 2 B framing per TLP.
_PCIE = 256 / 280
# NVLink packets carry up to 256 B of data behind one 16 B header flit (NVLink 2.0 packet format).
_NVLINK = 256 / 272


@dataclass(frozen=True, kw_only=True)
class Link:
    """One full-duplex link technology: bandwidth per direction, per-hop latency, protocol efficiency."""

    name: str
    """Short name, e.g. `100GbE` or `4GB/s@0.2us` for a plain link."""
    bandwidth_Bps: float
    """Data rate per direction in bytes per second (after line coding, before protocol headers)."""
    latency_s: float = 0.0
    """Latency of one hop over this link (switch port-to-port plus cable), in seconds."""
    efficiency: float = 1.0
    """Payload share of the bandwidth after framing and headers, in (0, 1]; used only on request."""
    description: str = ""
    """What the preset stands for and where its numbers come from."""

    def __post_init__(self) -> None:
        if not self.bandwidth_Bps > 0:
            raise ValueError(f"link {self.name!r} has bandwidth {self.bandwidth_Bps} B/s: give a bandwidth "
                             f"greater than zero, e.g. '25Gbps' or '4GB/s'")
        if not self.latency_s >= 0:
            raise ValueError(f"link {self.name!r} has latency {self.latency_s} s: give a latency >= 0, "
                             f"e.g. '0.2us'")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"link {self.name!r} has efficiency {self.efficiency}: give a value in (0, 1]")

    def effective_bandwidth(self, use_efficiency: bool = False) -> float:
        """Bytes per second per direction; the payload rate (times `efficiency`) if `use_efficiency`."""
        return self.bandwidth_Bps * (self.efficiency if use_efficiency else 1.0)


def _gbit(gbit_per_s: float) -> float:
    return gbit_per_s * 1e9 / 8


def _pcie_x16(gt_per_s: float) -> float:
    # PCIe 3.0 and later use 128b/130b encoding (PCI-SIG base specification 3.0, 4.0, 5.0).
    return gt_per_s * 1e9 * 16 * 128 / 130 / 8


# name, bandwidth per direction (B/s), per-hop latency (s), efficiency, source of the figures.
_PRESETS: dict[str, tuple[float, float, float, str]] = {
    "1GbE": (_gbit(1), 3e-6, _ETH_TCP,
             "IEEE 802.3ab 1000BASE-T; store-and-forward commodity switches quote 2-5 us for 64 B frames"),
    "10GbE": (_gbit(10), 0.5e-6, _ETH_TCP,
              "IEEE 802.3ae; cut-through 10GbE switches quote 0.35-0.8 us (Arista 7150S, Cisco Nexus 3064)"),
    "25GbE": (_gbit(25), 0.3e-6, _ROCE,
              "IEEE 802.3by, RoCEv2; Mellanox Spectrum SN2410 data sheet: 300 ns port-to-port"),
    "40GbE": (_gbit(40), 0.3e-6, _ETH_TCP,
              "IEEE 802.3ba; Mellanox Spectrum SN2700 data sheet: 300 ns port-to-port"),
    "100GbE": (_gbit(100), 0.3e-6, _ETH_TCP,
               "IEEE 802.3bj/802.3ba; Mellanox Spectrum SN2700 data sheet: 300 ns port-to-port"),
    "200GbE": (_gbit(200), 0.425e-6, _ETH_TCP,
               "IEEE 802.3bs; Mellanox Spectrum-2 SN3700 data sheet: 425 ns port-to-port"),
    "400GbE": (_gbit(400), 0.5e-6, _ETH_TCP,
               "IEEE 802.3bs; 400GbE switch ASICs (Spectrum-3, Tomahawk 3) quote 0.4-0.7 us"),
    # 800GbE in a GPU cluster carries RoCEv2 (NVIDIA Spectrum-X: ConnectX-8 SuperNICs on Spectrum-4), hence
    # RoCE's payload share rather than TCP's.
    "800GbE": (_gbit(800), 0.5e-6, _ROCE,
               "IEEE 802.3df 800GBASE-R, RoCEv2; NVIDIA Spectrum-4 SN5600 (64 ports of 800GbE); latency "
               "assumed equal to the 400GbE preset's 0.5 us"),
    # 1.6 Tb/s per port: IEEE 802.3dj (1.6TBASE, 200 Gb/s lanes), NVIDIA ConnectX-9 SuperNIC (1.6 Tb/s, announced
    # for Vera Rubin NVL144, GTC 2025) on Spectrum-X / Quantum-X Photonics switches (1.6 Tb/s ports); RoCE's payload.
    "1600GbE": (_gbit(1600), 0.5e-6, _ROCE,
                "IEEE 802.3dj 1.6TBASE, RoCEv2; NVIDIA ConnectX-9 SuperNIC 1.6 Tb/s (announced GTC 2025); latency "
                "assumed equal to the 800GbE preset's 0.5 us"),
    "OPA100": (_gbit(100), 0.11e-6, _OPA,
               "Intel Omni-Path 100: 100 Gb/s per port; Edge Switch 100 Series brief: 100-110 ns"),
    "EDR": (_gbit(100), 0.09e-6, _IB,
            "InfiniBand EDR 4x 25.78 Gbaud 64b/66b = 100 Gb/s; Mellanox Switch-IB 2 (SB7800): 90 ns"),
    "HDR": (_gbit(200), 0.13e-6, _IB,
            "InfiniBand HDR 200 Gb/s; Mellanox Quantum QM8700 data sheet: 130 ns"),
    "NDR": (_gbit(400), 0.13e-6, _IB,
            "InfiniBand NDR 400 Gb/s (NVIDIA Quantum-2 QM9700); latency assumed equal to Quantum's 130 ns"),
    "XDR": (_gbit(800), 0.13e-6, _IB,
            "InfiniBand XDR 800 Gb/s (NVIDIA ConnectX-8 SuperNIC, Quantum-X800 Q3400: 144 ports of 800 Gb/s); "
            "latency assumed equal to Quantum's 130 ns"),
    "PCIe3x16": (_pcie_x16(8), 0.1e-6, _PCIE,
                 "PCIe 3.0 x16, 8 GT/s per lane; Broadcom/PLX PEX 87xx switches: ~100 ns cut-through"),
    "PCIe4x16": (_pcie_x16(16), 0.1e-6, _PCIE,
                 "PCIe 4.0 x16, 16 GT/s per lane; Broadcom PEX88000 switches: ~100 ns port-to-port"),
    "PCIe5x16": (_pcie_x16(32), 0.1e-6, _PCIE,
                 "PCIe 5.0 x16, 32 GT/s per lane; Broadcom PEX89000 switches: ~100 ns port-to-port"),
    "PCIe6x16": (64e9 * 16 * 242 / 256 / 8, 0.1e-6, _PCIE,
                 "PCIe 6.0 x16, 64 GT/s per lane, PAM4 with FLIT encoding (242 of 256 bytes of a flit carry "
                 "data); ConnectX-8 SuperNIC's integrated PCIe 6.0 switch (HGX B300, GB300 NVL72)"),
    "NVLink-V100": (150e9, 0.75e-6, _NVLINK,
                    "NVLink 2.0: 6 links x 25 GB/s per direction per V100 (NVIDIA V100 data sheet: 300 GB/s "
                    "both ways); latency: half of the ~1.5 us GPU-to-GPU copy of CUDA p2pBandwidthLatencyTest"),
    "NVLink-A100": (300e9, 0.75e-6, _NVLINK,
                    "NVLink 3.0: 12 links x 25 GB/s per direction per A100 (data sheet: 600 GB/s both ways)"),
    "NVLink-H100": (450e9, 0.75e-6, _NVLINK,
                    "NVLink 4.0: 18 links x 25 GB/s per direction per H100 (data sheet: 900 GB/s both ways)"),
    "NVLink-B200": (900e9, 0.75e-6, _NVLINK,
                    "NVLink 5.0: 18 links x 50 GB/s per direction per B200 (HGX B200 specifications: 1.8 TB/s "
                    "both ways); packet format and latency taken as NVLink 4's"),
    "UPI": (20.8e9, 0.1e-6, 1.0,
            "Intel Ultra Path Interconnect, 10.4 GT/s x 20 lanes = 20.8 GB/s per direction per link "
            "(Xeon Scalable); remote-socket access adds ~0.1 us (Intel Memory Latency Checker)"),
}
LINK_PRESET_NAMES = tuple(_PRESETS)


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


_BY_KEY = {_key(name): name for name in _PRESETS}
# Speed-first spellings (`fabriclab plan --fabrics 25gbe,100g-opa,100gbe,200g-hdr,400g-ndr`) name the
# same data sheets as the presets above: Intel Omni-Path Edge Switch 100 Series brief (OPA100),
# Mellanox Switch-IB 2 SB7800 (EDR), Mellanox Quantum QM8700 (HDR), NVIDIA Quantum-2 QM9700 (NDR),
# NVIDIA Quantum-X800 Q3400 (XDR).
_BY_KEY.update({_key(alias): name for alias, name in (("100G-OPA", "OPA100"), ("100G-EDR", "EDR"),
                                                      ("200G-HDR", "HDR"), ("400G-NDR", "NDR"),
                                                      ("800G-XDR", "XDR"), ("1.6T", "1600GbE"),
                                                      ("1600G", "1600GbE"), ("1.6TbE", "1600GbE"))})


def link_preset(name: str) -> Link:
    """The preset called `name` (case, `-`, `_`, `.` and spaces ignored: `pcie3-x16` works)."""
    canonical = _BY_KEY.get(_key(name)) if isinstance(name, str) else None
    if canonical is None:
        raise ValueError(f"unknown link preset {name!r}: use one of {', '.join(LINK_PRESET_NAMES)}, "
                         f"or a bandwidth and latency such as '4GB/s@0.2us'")
    bandwidth_Bps, latency_s, efficiency, description = _PRESETS[canonical]
    return Link(name=canonical, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s, efficiency=efficiency,
                description=description)


def plain_link(bandwidth: str | float, latency: str | float = 0.0) -> Link:
    """A link given by bandwidth (`'4GB/s'`, `'25Gbps'` or B/s) and latency (`'0.2us'` or s)."""
    bandwidth_Bps = parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else float(bandwidth)
    latency_s = parse_time(latency) if isinstance(latency, str) else float(latency)
    name = f"{_fmt(bandwidth_Bps)}B/s" + (f"@{latency_s * 1e6:g}us" if latency_s else "")
    return Link(name=name, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s,
                description="plain link given by bandwidth and latency")


def parse_link(spec: str | Link) -> Link:
    """A `Link`, a preset name (`EDR`, `EDR@1us`), a bandwidth (`4GB/s`) or bandwidth@latency (`4GB/s@0.2us`)."""
    if isinstance(spec, Link):
        return spec
    if not isinstance(spec, str):
        raise ValueError(f"invalid link {spec!r}: give a preset name such as 'EDR' or '4GB/s@0.2us'")
    bandwidth, _, latency = spec.partition("@")
    if _key(bandwidth) in _BY_KEY:
        return with_overrides(link_preset(bandwidth), latency_s=parse_time(latency) if latency.strip() else None)
    try:
        return plain_link(bandwidth.strip(), latency.strip() or 0.0)
    except ValueError as err:
        raise ValueError(f"invalid link {spec!r}: use a preset ({', '.join(LINK_PRESET_NAMES)}) or "
                         f"bandwidth@latency such as '4GB/s@0.2us' ({err})") from None


def with_overrides(link: Link, *, bandwidth_Bps: float | None = None, latency_s: float | None = None) -> Link:
    """`link` with its bandwidth and/or latency replaced: numbers in B/s and s (text such as `4GB/s` is
    parsed once, at the command line, with `fabriclab.units`)."""
    changes: dict[str, float] = {}
    for key, value in (("bandwidth_Bps", bandwidth_Bps), ("latency_s", latency_s)):
        if isinstance(value, str):
            raise TypeError(f"{key}={value!r}: give a number (parse text with fabriclab.units at the edge)")
        if value is not None:
            changes[key] = float(value)
    if not changes:
        return link
    new = replace(link, **changes)
    if "bandwidth_Bps" in changes:
        return replace(new, name=plain_link(new.bandwidth_Bps, new.latency_s).name)
    return replace(new, name=f"{link.name.partition('@')[0]}@{new.latency_s * 1e6:g}us")


def _fmt(value: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{prefix}"
    return f"{value:g}"


# The base case of Zhang, Li, Tanimura, Nakada ("How Much Should We Invest for Network Facility"): 4 GB/s links
# and 0.2 us switch latency, which the poster simulated per link in SimGrid.
DEFAULT_LINK = "4GB/s@0.2us"


def resolve_link(link: Link | str = DEFAULT_LINK, link_Bps: float | None = None,
                 latency_s: float | None = None) -> Link:
    """What the topology presets take: a link (preset or plain), then optional overrides."""
    return with_overrides(parse_link(link), bandwidth_Bps=link_Bps, latency_s=latency_s)
