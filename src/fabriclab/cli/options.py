"""The topology options, defined once: simulate, whatif (cost simulated), emu, validate and plan share them.

Each option is an `Annotated` alias; a command takes the ones it needs with the defaults below
(`hosts: HostsOption = None`) and hands them to `topology_spec_from(...)`, which parses every quantity
once, here at the edge (`4GB/s`, `0.2us`, `1/4`, a link preset such as `25GbE`), into the numbers of a
`fabric.scenario.TopologySpec`. Options are read as text and parsed by fabriclab, so a bad value is
one line `error: ...` that says what to change, like every other bad input.

The one default network: a 2-level fat tree of 8 hosts, 4 per leaf, full bisection, 4 GB/s links with
0.2 us per link (the base case of Zhang, Li, Tanimura, Nakada, "How Much Should We Invest for Network
Facility"). The emulator's default link is 1 Gbit/s instead, a rate this machine can shape.

Try it: `fabriclab simulate collective --topology torus --hosts 16 --link 25GbE`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Annotated, Optional

import typer

from fabriclab.fabric.preset_names import PRESET_NAMES  # names only: --help builds no cluster model

DEFAULT_TOPOLOGY = "fat-tree"
DEFAULT_HOSTS = 8
DEFAULT_LEVELS = "2"
DEFAULT_BISECTION = "1"
DEFAULT_SPINES = "4"
DEFAULT_LINK = "4GB/s"
DEFAULT_LATENCY = "0.2us"
DEFAULT_GPUS_PER_SERVER = "1"
DEFAULT_ROUTING = "dmodk"
EMU_DEFAULT_LINK = "1Gbps"

TopologyOption = Annotated[str, typer.Option(
    "--topology", metavar="KIND",
    help="star, fat-tree, leaf-spine, ring, torus or flattened-butterfly.")]
HostsOption = Annotated[Optional[str], typer.Option(
    "--hosts", metavar="N",
    help=f"Hosts (default {DEFAULT_HOSTS}; torus and flattened butterfly: from --dims when given).")]
HostsPerLeafOption = Annotated[Optional[str], typer.Option(
    "--hosts-per-leaf", metavar="N",
    help="Hosts under one leaf switch (fat tree, leaf-spine); default 16, or for fewer hosts the largest "
         "leaf that still makes two leaves.")]
LevelsOption = Annotated[str, typer.Option("--levels", metavar="N", help="Fat-tree levels: 2 or 3.")]
BisectionOption = Annotated[str, typer.Option(
    "--bisection", metavar="RATIO", help="Fat-tree bisection ratio: 1, 1/2, 1/4, ... 1/16.")]
LeavesPerPodOption = Annotated[Optional[str], typer.Option(
    "--leaves-per-pod", metavar="N", help="3-level fat trees: leaves per pod (default: hosts per leaf).")]
SpinesOption = Annotated[str, typer.Option("--spines", metavar="N", help="Leaf-spine: number of spines.")]
DimsOption = Annotated[Optional[str], typer.Option(
    "--dims", metavar="AxB", help="Torus / flattened butterfly dimensions, e.g. 4x4 (default: from --hosts).")]
LinkOption = Annotated[Optional[str], typer.Option(
    "--link", metavar="LINK",
    help="Link preset (25GbE, 100GbE, EDR, HDR, OPA100, ...) or a bandwidth such as 4GB/s or 25Gbps.")]
LatencyOption = Annotated[Optional[str], typer.Option(
    "--latency", metavar="TIME",
    help=f"Per-link latency, e.g. 0.2us (default: the preset's; {DEFAULT_LATENCY} for a bandwidth).")]
GpusPerServerOption = Annotated[str, typer.Option(
    "--gpus-per-server", metavar="N", help="GPUs (ranks) per server; they share its NIC.")]
RoutingOption = Annotated[str, typer.Option("--routing", metavar="NAME", help="Fat-tree routing: dmodk or ecmp.")]
EcmpSeedOption = Annotated[str, typer.Option("--seed", metavar="N", help="Seed of ECMP hashing and of random "
                                                                          "placement.")]


def parse_count(text: str | int | None, option: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """A whole number given as `option` (e.g. `--hosts`), at least `minimum` (and at most `maximum`)."""
    if isinstance(text, bool):
        raise ValueError(f"{option} {text!r}: give a whole number")
    if isinstance(text, int):
        value = text
    else:
        cleaned = str(text).strip().replace("_", "")
        if not cleaned.isdigit() or len(cleaned) > 18:
            raise ValueError(f"{option} {text!r}: give a whole number"
                             + (f" >= {minimum}" if maximum is None else f" in {minimum}..{maximum}"))
        value = int(cleaned)
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{option} {value}: give a whole number"
                         + (f" >= {minimum}" if maximum is None else f" in {minimum}..{maximum}"))
    return value


def parse_number(text: str | float, option: str, *, minimum: float = 0.0, example: str = "1") -> float:
    """A finite number >= `minimum` given as `option`; NaN, inf and smaller values are refused."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{option} {text!r}: give a number, e.g. {example}") from None
    if not math.isfinite(value) or value < minimum:
        raise ValueError(f"{option} {text}: give a finite number >= {minimum:g}, e.g. {example}")
    return value


def parse_nice(text: str) -> int:
    """`--nice`: a nice(1) priority, -20..19."""
    value = text.strip()
    if not value.lstrip("-").isdigit() or not -20 <= int(value) <= 19:
        raise ValueError(f"--nice {text!r}: give a priority in -20..19 (nice(1))")
    return int(value)


def parse_dims(text: str | None) -> tuple[int, ...] | None:
    """`4x4` -> (4, 4); None stays None."""
    if text is None:
        return None
    parts = text.strip().lower().split("x")
    if not all(p.strip().isdigit() for p in parts) or not 1 <= len(parts) <= 4:
        raise ValueError(f"--dims {text!r}: write 1 to 4 sizes like 8, 4x4 or 4x4x4")
    dims = tuple(int(p) for p in parts)
    if min(dims) < 1:
        raise ValueError(f"--dims {text!r}: every size must be >= 1")
    return dims


def parse_link_option(link: str, latency: str | None) -> tuple[str | None, float, float]:
    """(preset name or None, bandwidth B/s, latency s) of `--link` and `--latency`."""
    from fabriclab.fabric.links import LINK_PRESET_NAMES, parse_link
    from fabriclab.fabric.scenario import DEFAULT_LATENCY_S
    from fabriclab.units import check_link_bandwidth, check_link_latency, parse_bandwidth, parse_time

    latency_s = None if latency is None else parse_time(latency)
    try:
        bandwidth_Bps = parse_bandwidth(link)
        name = None
        default_latency = DEFAULT_LATENCY_S
    except ValueError:
        try:
            found = parse_link(link)
        except ValueError:
            raise ValueError(f"--link {link!r}: give a preset ({', '.join(LINK_PRESET_NAMES)}) or a bandwidth "
                             f"such as 4GB/s or 25Gbps") from None
        bandwidth_Bps, default_latency = found.bandwidth_Bps, found.latency_s
        name = found.name.partition("@")[0]
        name = name if name in LINK_PRESET_NAMES else None  # `4GB/s@0.2us` is a plain link
    check_link_bandwidth(bandwidth_Bps, "--link", link)
    if latency_s is None:  # the preset's, or the one written after `@` in --link
        check_link_latency(default_latency, "--link", link)
        return name, bandwidth_Bps, default_latency
    return name, bandwidth_Bps, check_link_latency(latency_s, "--latency", latency)


def parse_bisection(text: str | Fraction | float) -> Fraction:
    """`1/4` (or a number in (0, 1]) as a Fraction: `units.parse_fraction` with the option's name."""
    from fabriclab.units import parse_fraction

    if isinstance(text, Fraction):
        value = text
    elif isinstance(text, (int, float)):
        value = Fraction(text).limit_denominator(1 << 20)
    else:
        try:
            value = parse_fraction(text)
        except ValueError as exc:
            raise ValueError(f"--bisection: {exc}") from None
    if not 0 < value <= 1:
        raise ValueError(f"--bisection {text}: give a ratio in (0, 1], e.g. 1, 1/2, 1/4")
    return value


def topology_spec_from(*, topology: str = DEFAULT_TOPOLOGY, hosts: str | int | None = None,
                       hosts_per_leaf: str | int | None = None, levels: str | int = DEFAULT_LEVELS,
                       bisection: str | Fraction = DEFAULT_BISECTION, leaves_per_pod: str | int | None = None,
                       spines: str | int = DEFAULT_SPINES, dims: str | None = None, link: str | None = DEFAULT_LINK,
                       latency: str | None = None, gpus_per_server: str | int = DEFAULT_GPUS_PER_SERVER,
                       routing: str = DEFAULT_ROUTING, seed: str | int = "0"):
    """The `TopologySpec` the options describe; a ValueError names the option to change."""
    from fabriclab.fabric.scenario import KINDS, TopologySpec, auto_hosts_per_leaf

    kind = topology.strip().lower()
    if kind not in KINDS:
        raise ValueError(f"--topology {topology!r}: use one of {', '.join(KINDS)}")
    shape = parse_dims(dims)
    if shape is not None and kind not in ("torus", "flattened-butterfly"):
        raise ValueError(f"--dims is for torus and flattened-butterfly, not {kind}: drop it or change --topology")
    num_hosts = None if hosts is None else parse_count(hosts, "--hosts")
    name, bandwidth_Bps, latency_s = parse_link_option(DEFAULT_LINK if link is None else link, latency)
    routing = routing.strip().lower()
    if routing != DEFAULT_ROUTING and kind not in ("fat-tree", "leaf-spine"):
        raise ValueError(f"--routing {routing}: only fat-tree and leaf-spine have a choice of routes "
                         f"(dmodk or ecmp); drop --routing for a {kind}")
    num_hosts_or_default = DEFAULT_HOSTS if num_hosts is None else num_hosts
    num_levels = parse_count(levels, "--levels", minimum=2, maximum=3)
    ratio = parse_bisection(bisection)
    leaf = (auto_hosts_per_leaf(num_hosts_or_default, ratio, num_levels) if hosts_per_leaf is None
            else parse_count(hosts_per_leaf, "--hosts-per-leaf"))
    spec = TopologySpec(
        kind=kind, hosts=num_hosts_or_default, levels=num_levels, hosts_per_leaf=leaf, bisection=ratio,
        leaves_per_pod=None if leaves_per_pod is None else parse_count(leaves_per_pod, "--leaves-per-pod"),
        spines=parse_count(spines, "--spines"), dims=shape, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s,
        link=name, gpus_per_server=parse_count(gpus_per_server, "--gpus-per-server", maximum=64),
        routing=routing, seed=parse_count(seed, "--seed", minimum=0))
    if shape is not None and num_hosts is not None and num_hosts != spec.num_hosts:
        raise ValueError(f"--hosts {num_hosts} and --dims {dims} ({spec.num_hosts} hosts) disagree: give one of them")
    return spec


class TopologyGroup:
    """The topology options as one object: a command takes the options it shows (the aliases above) and
    `TOPOLOGY.build(locals())` turns them into the network's `TopologySpec`; options a command does not
    show keep their defaults, and `overrides` (e.g. `hosts=`) replace a value."""

    NAMES = ("topology", "hosts", "hosts_per_leaf", "levels", "bisection", "leaves_per_pod", "spines", "dims",
             "link", "latency", "gpus_per_server", "routing", "seed")

    def build(self, values: dict, **overrides):
        given = {k: values[k] for k in self.NAMES if k in values}
        return topology_spec_from(**{**given, **overrides})


TOPOLOGY = TopologyGroup()

ClusterOption = Annotated[Optional[str], typer.Option(
    "--cluster", metavar="FILE|PRESET",
    help="A cluster: a file from `fabriclab calibrate nccl-tests ... --out FILE`, or a preset "
         f"({', '.join(PRESET_NAMES)}).")]


def load_cluster_option(text: str, option: str = "--cluster"):
    """The cluster `--cluster` names: a preset name, else a cluster file; a ValueError says which exist."""
    from pathlib import Path

    from fabriclab.fabric.cluster import load_cluster
    from fabriclab.fabric.presets import PRESETS, cluster_preset

    if text.strip().lower() in PRESETS:
        return cluster_preset(text)
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"{option} {text}: no such file and no preset of that name; give a cluster file "
                         f"(`fabriclab calibrate nccl-tests ... --out FILE` writes one) or a preset: "
                         f"{', '.join(PRESETS)}")
    return load_cluster(path)
