"""Price tables for `fabriclab plan`: what a NIC, a switch port and a cable cost per fabric.

A table is JSON: optional `label`, `currency`, `compiled`, `note`; an optional `gpu_server_per_gpu`
(the GPU servers, per GPU, for the network's share of the cluster); and `fabrics`, one entry per link
preset (`25GbE`, `OPA100`, `100GbE`, `HDR`, `NDR`, or any spelling `link_preset` accepts) with four
prices: `nic` (one per server), `switch_port` (one per used port), `host_cable` (server to leaf, one
per server) and `switch_cable` (switch to switch, cable or pair of optics, one per link). A price is a
number or `{"usd": number, "source": text, "date": text}`.

The shipped table (`plan/data/prices.json`) is illustrative: most entries are fabriclab's own round
figures, a few cite a public listing with its date; every entry says which.

Try it: `python -c "from fabriclab.plan.prices import load_prices; print(load_prices().fabric('25gbe'))"`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from fabriclab.fabric.links import link_preset
from fabriclab.textfile import read_text

DEFAULT_PRICES = Path(__file__).parent / "data" / "prices.json"
SHIPPED_SOURCE = "fabriclab's shipped table (plan/data/prices.json)"
ITEMS = ("nic", "switch_port", "host_cable", "switch_cable")
_EXAMPLE = ('{"fabrics": {"100GbE": {"nic": 800, "switch_port": 250, "host_cable": 80, '
            '"switch_cable": 125}}}')


@dataclass(frozen=True, kw_only=True)
class Price:
    """One price with where it comes from."""

    usd: float
    """Price in US dollars (>= 0)."""
    source: str = ""
    """Where the figure comes from ('assumed: ...' for a round figure without a public source)."""
    date: str = ""
    """When the figure was taken (ISO date)."""


@dataclass(frozen=True, kw_only=True)
class FabricPrices:
    """The four prices of one fabric."""

    fabric: str
    """Canonical link preset name, e.g. `100GbE`."""
    nic: Price
    """One network adapter (one per server)."""
    switch_port: Price
    """One used switch port (a switch's price spread over its ports)."""
    host_cable: Price
    """One server-to-leaf cable."""
    switch_cable: Price
    """One switch-to-switch link: a cable, or two optics and fibre."""


@dataclass(frozen=True, kw_only=True)
class PriceTable:
    """Prices per fabric, optionally the GPU servers, and what the table is."""

    fabrics: dict
    """Canonical fabric name -> FabricPrices."""
    gpu_server_per_gpu: Price | None = None
    """Server price per GPU (None: the network's share of the cluster is unknown)."""
    server_gpu: str = ""
    """The GPU that server price is of (`"gpu"` of the entry, e.g. `H100`); empty: H100 (`plan/compute.py`)."""
    label: str = ""
    """`illustrative` for the shipped table; what the user calls theirs otherwise."""
    source: str = ""
    """The file it was read from."""
    note: str = ""
    """Free text from the file."""

    def fabric(self, name: str) -> FabricPrices:
        """The prices of fabric `name` (any spelling of a link preset)."""
        canonical = link_preset(name).name
        if canonical not in self.fabrics and self.source == SHIPPED_SOURCE and canonical in EXTRA_FABRIC_PRICES:
            return EXTRA_FABRIC_PRICES[canonical]  # the 800G estimates below complete the shipped table
        if canonical not in self.fabrics:
            raise ValueError(f"no prices for fabric {name!r} in {self.source}: add an entry \"{canonical}\" "
                             f"with {', '.join(ITEMS)} to the price file, or drop it from --fabrics "
                             f"(priced: {', '.join(self.fabrics)})")
        return self.fabrics[canonical]

    def describe(self) -> str:
        """One line: which table, and that it is illustrative when it is."""
        what = f"{self.label} prices" if self.label else "prices"
        return f"{what} from {self.source}" + (" (not quotes: replace with --prices FILE)"
                                                if self.label == "illustrative" else "")


def load_prices(path: str | Path | None = None) -> PriceTable:
    """Read a price table (default: the shipped illustrative one); bad values raise ValueError."""
    shipped = path is None
    path = DEFAULT_PRICES if shipped else Path(path)
    try:
        text = read_text(path, "price file")
    except OSError as exc:
        raise ValueError(f"cannot read price file {path} ({exc.strerror}): give an existing JSON file") from None
    if not text.strip():
        raise ValueError(f"price file {path} is empty: write a JSON object such as {_EXAMPLE}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"price file {path} is not JSON ({exc.msg} at line {exc.lineno}): "
                         f"write an object such as {_EXAMPLE}") from None
    source = SHIPPED_SOURCE if shipped else str(path)
    return parse_prices(data, source=source)


def parse_prices(data: object, *, source: str = "<prices>") -> PriceTable:
    """A PriceTable from parsed JSON (see the module doc)."""
    if not isinstance(data, dict) or not isinstance(data.get("fabrics"), dict) or not data["fabrics"]:
        raise ValueError(f"{source}: needs a non-empty \"fabrics\" object, e.g. {_EXAMPLE}")
    fabrics = {}
    for name, entry in data["fabrics"].items():
        try:
            canonical = link_preset(name).name
        except ValueError as exc:
            raise ValueError(f"{source}: fabric {name!r}: {exc}") from None
        if not isinstance(entry, dict):
            raise ValueError(f"{source}: fabric {name!r} must map {', '.join(ITEMS)} to prices")
        missing = [item for item in ITEMS if item not in entry]
        if missing:
            raise ValueError(f"{source}: fabric {name!r} has no price for {', '.join(missing)}: add them "
                             f"(numbers in USD, or {{\"usd\": ..., \"source\": ..., \"date\": ...}})")
        fabrics[canonical] = FabricPrices(fabric=canonical, **{
            item: _price(entry[item], f"{source}: fabrics.{name}.{item}") for item in ITEMS})
    server = data.get("gpu_server_per_gpu")
    server_price = None if server is None else _price(server, f"{source}: gpu_server_per_gpu")
    server_gpu = str(server.get("gpu", "")) if isinstance(server, dict) else ""
    return PriceTable(fabrics=fabrics, label=str(data.get("label", "")), source=source,
                      note=str(data.get("note", "")), gpu_server_per_gpu=server_price, server_gpu=server_gpu)


def _price(value: object, where: str) -> Price:
    source, date = "", ""
    if isinstance(value, dict):
        if "usd" not in value:
            raise ValueError(f"{where}: give the price as a number or as {{\"usd\": number, ...}}")
        source, date = str(value.get("source", "")), str(value.get("date", ""))
        value = value["usd"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} is {value!r}: give a number of US dollars, e.g. 250")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} is {value}: give a finite price >= 0 in US dollars")
    return Price(usd=float(value), source=source, date=date)


# ---- Prices the LLM plan needs beyond the table (`plan/llm/cost.py`): the GPU servers by GPU, and the 800G
# fabric the shipped table lacks. Each says where it comes from; "estimate:" entries give their basis.
# H100 is the shipped table's own source; H200 and B200 scale it by the ratio of their per-GPU street prices
# in aiinframap.com's "H100 vs H200 vs B200 TCO" tool (mid-2026 typical figures, per GPU: H100 ~30,000,
# H200 ~35,000, B200 ~40,000 USD, "rough public estimates"), i.e. x 7/6 and x 4/3.
_TCO_TOOL = "aiinframap.com/tools/chips/h100-vs-h200-vs-b200-tco"
SERVER_PRICE_PER_GPU: dict[str, Price] = {
    "H100-SXM5-80GB": Price(usd=37_500, date="2025-12-28", source=(
        "ITCT Shop, 'GPU Cluster Design Guide' (itctshop.com/gpu-cluster-design-guide, updated 2025-12-28): "
        "HGX H100 8-GPU server listed at USD 300,000, i.e. 37,500 per GPU")),
    "H200-SXM-141GB": Price(usd=43_750, date="2026-11-24", source=(
        f"estimate: the HGX H100 server's USD 300,000 (ITCT Shop) x 35,000 / 30,000, the H200 / H100 per-GPU "
        f"street prices of {_TCO_TOOL}: USD 350,000 per 8-GPU server")),
    "B200-SXM-180GB": Price(usd=50_000, date="2026-11-24", source=(
        f"estimate: the HGX H100 server's USD 300,000 (ITCT Shop) x 40,000 / 30,000, the B200 / H100 per-GPU "
        f"street prices of {_TCO_TOOL}: USD 400,000 per 8-GPU server")),
    # NVL72 racks are priced whole (72 GPUs, 36 Grace CPUs, 9 NVLink switch trays, liquid cooling): public estimates
    # of USD 2-3 million per GB200 NVL72 and 3-4 million per GB300 NVL72 (awesomeagents.ai hardware pages, 2025-2026),
    # their middles, per GPU. HGX B300: the B200 estimate x 3.5 / 2.5, the GB300 / GB200 rack ratio.
    "GB200-B200-186GB": Price(usd=2_500_000 / 72, date="2026-11-27", source=(
        "estimate: USD 2.5 million per GB200 NVL72 rack (the middle of 'USD 2-3 million per rack', awesomeagents.ai, "
        "'NVIDIA GB200 NVL72'), / 72 GPUs")),
    "GB300-B300-278GB": Price(usd=3_500_000 / 72, date="2026-11-27", source=(
        "estimate: USD 3.5 million per GB300 NVL72 rack (the middle of 'an estimated USD 3-4 million per rack', "
        "awesomeagents.ai, 'NVIDIA GB300 NVL72'), / 72 GPUs")),
    "B300-SXM-288GB": Price(usd=70_000, date="2026-11-27", source=(
        "estimate: the B200 server estimate (USD 400,000 per 8) x 3.5 / 2.5, the GB300 / GB200 NVL72 rack price "
        "ratio: USD 560,000 per 8-GPU server")),
    "A100-SXM4-80GB": Price(usd=25_000, date="2020-05-14", source=(
        "NVIDIA DGX A100 at launch 'from USD 200,000' (geektopia.es, 'Nvidia anuncia el servidor DGX-A100', "
        "2020-05-14), i.e. 25,000 per GPU; a launch list price, not today's")),
}
# 800 Gb/s (XDR, ConnectX-8, Quantum-X800) has no public price list here: each part is the shipped NDR
# (400 Gb/s) price x 2, the step the shipped table shows from HDR to NDR (NIC 1,500 -> 2,200, switch cable
# 700 -> 1,800) rounded to the doubled line rate.
_XDR_BASIS = "estimate: the shipped NDR (400G) price x 2 for twice the line rate"
# 1.6 Tb/s (IEEE 802.3dj, ConnectX-9) ships with Vera Rubin: no price is public; the 800G estimate x 2, the same step.
_TB16_BASIS = "estimate: the 800G estimate x 2 for twice the line rate (no public 1.6T price)"
EXTRA_FABRIC_PRICES: dict[str, FabricPrices] = {
    "XDR": FabricPrices(fabric="XDR", nic=Price(usd=4_400, date="2026-11-24", source=f"{_XDR_BASIS} (ConnectX-8)"),
                        switch_port=Price(usd=656, date="2026-11-24", source=f"{_XDR_BASIS} (Quantum-X800 port)"),
                        host_cable=Price(usd=600, date="2026-11-24", source=f"{_XDR_BASIS} (copper, 1-3 m)"),
                        switch_cable=Price(usd=3_600, date="2026-11-24", source=f"{_XDR_BASIS} (two optics)")),
    "800GbE": FabricPrices(fabric="800GbE",
                           nic=Price(usd=4_400, date="2026-11-24", source=f"{_XDR_BASIS} (ConnectX-8 SuperNIC, Ethernet)"),
                           switch_port=Price(usd=656, date="2026-11-24", source=f"{_XDR_BASIS} (Spectrum-4 SN5600 port)"),
                           host_cable=Price(usd=600, date="2026-11-24", source=f"{_XDR_BASIS} (copper, 1-3 m)"),
                           switch_cable=Price(usd=3_600, date="2026-11-24", source=f"{_XDR_BASIS} (two optics)")),
    "1600GbE": FabricPrices(fabric="1600GbE",
                            nic=Price(usd=8_800, date="2026-11-27", source=f"{_TB16_BASIS} (ConnectX-9 SuperNIC)"),
                            switch_port=Price(usd=1_312, date="2026-11-27", source=f"{_TB16_BASIS} (1.6T switch port)"),
                            host_cable=Price(usd=1_200, date="2026-11-27", source=f"{_TB16_BASIS} (copper, 1-3 m)"),
                            switch_cable=Price(usd=7_200, date="2026-11-27", source=f"{_TB16_BASIS} (two optics)")),
}
