"""Fabric presets for the emulator: the two back-end fabrics of Samsi et al., scaled down to fit one machine.

Samsi et al. ("Benchmarking network fabrics for data distributed training of deep neural networks", MIT
Lincoln Laboratory TX-GAIA) compares, on the same nodes, a 25 Gb/s Ethernet fabric with RoCE (Mellanox
ConnectX-4, one non-blocking Arista DCS-7516 core switch) and a 100 Gb/s Intel Omni-Path fabric; it finds
12.78 % fewer images/s on Ethernet for CNN training and the same communication time for a CFD code.

A preset names a link preset of `fabriclab.fabric.links`; `scale` (default 1/100) sets the time dilation
D = 1/scale, so the emulated links run at bandwidth * scale (25GbE -> 250 Mbit/s, OPA100 -> 1 Gbit/s) while
the recorded spec keeps the real link: measured times divided by D are times on the real fabric (see
`undilate_time`). The per-link latencies of the presets (300 ns, 110 ns) are recorded but not
emulated (no netem here).

Try it: `sudo fabriclab emu up --topology star --hosts 4 --preset 25gbe --scale 1/100`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabriclab.fabric.links import link_preset
from fabriclab.fabric.scenario import TopologySpec
from fabriclab.units import parse_ratio

DEFAULT_SCALE = "1/100"


@dataclass(frozen=True, kw_only=True)
class FabricPreset:
    """A fabric of Samsi et al. (TX-GAIA): a link preset and what it stands for."""

    name: str
    """Preset name on the command line, e.g. `25gbe`."""
    link: str
    """Link preset of `fabriclab.fabric.links` (one of LINK_PRESET_NAMES)."""
    description: str
    """What the fabric is, from Samsi et al."""


FABRIC_PRESETS: dict[str, FabricPreset] = {
    "25gbe": FabricPreset(name="25gbe", link="25GbE",
                          description="25 Gb/s Ethernet with RoCE (Mellanox ConnectX-4), one non-blocking "
                                      "Arista DCS-7516 core switch (Samsi et al., TX-GAIA)"),
    "100g-opa": FabricPreset(name="100g-opa", link="OPA100",
                             description="100 Gb/s Intel Omni-Path (Samsi et al., TX-GAIA)"),
}
FABRIC_PRESET_NAMES = tuple(FABRIC_PRESETS)


def fabric_preset(name: str) -> FabricPreset:
    """The preset called `name` (case-insensitive)."""
    preset = FABRIC_PRESETS.get(name.strip().lower()) if isinstance(name, str) else None
    if preset is None:
        raise ValueError(f"unknown fabric preset {name!r}: use one of {', '.join(FABRIC_PRESET_NAMES)}")
    return preset


def parse_scale(scale: str | float) -> float:
    """A scale in (0, 1]: `1/100`, `0.01` or a float."""
    if isinstance(scale, str):
        return parse_ratio(scale)
    if not 0 < float(scale) <= 1:
        raise ValueError(f"scale {scale}: give a fraction in (0, 1], e.g. 1/100")
    return float(scale)


def apply_preset(spec: TopologySpec, preset: str, scale: str | float = DEFAULT_SCALE, *,
                 latency_s: float | None = None) -> tuple[TopologySpec, float]:
    """`spec` with the preset's link (its bandwidth, and its latency unless `latency_s` is given: the
    latency is only recorded), and the dilation 1/scale."""
    chosen = fabric_preset(preset)
    link = link_preset(chosen.link)
    return (replace(spec, link=link.name, bandwidth_Bps=link.bandwidth_Bps,
                    latency_s=link.latency_s if latency_s is None else latency_s), 1.0 / parse_scale(scale))


def emulated_rate_Bps(preset: str, scale: str | float = DEFAULT_SCALE) -> float:
    """Rate the emulated links of a preset run at: the link's bandwidth * scale, bytes per second."""
    return link_preset(fabric_preset(preset).link).bandwidth_Bps * parse_scale(scale)


def undilate_time(measured_s: float, dilation: float) -> float:
    """Time on the real fabric of something measured at rate / D: measured / D."""
    return measured_s / dilation


def undilate_bandwidth(measured_Bps: float, dilation: float) -> float:
    """Bandwidth on the real fabric of one measured at rate / D: measured * D."""
    return measured_Bps * dilation
