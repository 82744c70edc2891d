"""`fabriclab cluster list|show|export`: the presets, a cluster as the simulators see it, a file to edit.

`list` prints every preset in one line each: GPU, GPUs per server (tray) and per NVLink domain, NICs per GPU
and their rate, the network, the NCCL release and the price per GPU a plan charges (with whether it is a
listing or an estimate). `show` prints its servers (GPUs, internal fabric, NICs and the PCIe path to them, with the cap a PCIe path
puts on a faster NIC), network, library version and compute; `export --out FILE` writes the cluster file
that `--cluster FILE` of whatif, plan, simulate and calibrate reads back (`fabric/cluster.load_cluster`).
Both take `whatif llm`'s `--fabric`, `--bisection` and `--nic-rate`, so an edited preset is one command.

Try it: `fabriclab cluster export dgx-h100 --nic-rate 800Gbps --out h100-800g.json`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated

import typer

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, check_output_file, user_errors
from fabriclab.cli.llm_options import BisectionOption, FabricOption, NicRateOption, vary_cluster_options

app = typer.Typer(help="Cluster presets and files: show one, or export it as a file to edit.",
                  no_args_is_help=True)
ClusterArgument = Annotated[str, typer.Argument(metavar="PRESET|FILE", help="A cluster preset (dgx-h100, ...) or "
                                                                            "a cluster file.")]


def register(main_app: typer.Typer) -> None:
    """Add the `cluster` group to the main app."""
    main_app.add_typer(app, name="cluster")


def _load(name: str, fabric: str | None, bisection: str | None, nic_rate: str | None):
    from fabriclab.cli.options import load_cluster_option

    return vary_cluster_options(load_cluster_option(name, "cluster"), fabric, bisection, nic_rate)


def cluster_rows(cluster) -> list[dict]:
    """What a prediction takes from the cluster, one {"part", "value"} each."""
    from fabriclab.fabric.cluster import cluster_gpu
    from fabriclab.nccl.features import feature_lines
    from fabriclab.plan.llm.cluster import pcie_cap

    s, n, lib, gpu = cluster.server, cluster.network, cluster.library, cluster_gpu(cluster)
    peaks = ", ".join(f"{k} {v / 1e12:,.0f}" for k, v in gpu.peak_flops.items())
    domain = s.gpus_per_domain or s.gpus_per_server
    rows = [("servers", f"{s.gpus_per_server} x {gpu.name} ({gpu.memory_bytes / 1e9:.1f} GB, "
                        f"{gpu.memory_bandwidth_Bps / 1e12:.2f} TB/s)"),
            ("peak TFLOP/s", peaks),
            ("NVLink domain", f"{domain} GPUs" + (f" ({domain // s.gpus_per_server} servers of {s.gpus_per_server}, "
                                                  f"one node to NCCL from 2.20)" if domain > s.gpus_per_server
                                                  else " (the server)")
             + (f", a job uses {s.domain_gpus_used} of each" if s.domain_gpus_used else "")),
            ("inside a domain", f"{s.intra}, {s.intra_bandwidth_Bps / 1e9:.4g} GB/s per GPU a direction, "
                                f"{s.intra_latency_s * 1e6:g} us a hop"),
            ("NICs", f"{s.nics_per_server} x {s.nic_bandwidth_Bps * 8 / 1e9:g} Gb/s per server, "
                     f"{s.nic_efficiency:.3g} of line rate reached"),
            ("GPU-NIC PCIe", f"{s.pcie_bandwidth_Bps / 1e9:.1f} GB/s ({s.pcie_bandwidth_Bps * 8 / 1e9:.0f} Gb/s) "
                             f"a direction"),
            ("network", f"{n.fabric}, bisection {n.bisection:g}, {n.leaf_ports} ports per leaf"),
            ("library", f"{lib.name} {lib.nccl_version}, {lib.num_channels} channels"),
            *(("", line) for line in feature_lines(cluster)),
            *((("NCCL settings", " ".join(f"{k}={v}" for k, v in sorted(lib.nccl_env.items()))),)
              if lib.nccl_env else ()),
            *((("tuner plugin", f"{len(lib.tuner)} rules override NCCL's choice: {_tuner_words(lib.tuner)}"),)
              if lib.tuner else ()),
            *((("p2p channel", f"{lib.p2p_channel_bandwidth_Bps / 1e9:.3g} GB/s a channel to a peer on another "
                               f"server (sendrecv runs on the few channels NCCL gives it)"),)
              if lib.p2p_channel_bandwidth_Bps else ()),
            ("storage", f"checkpoints at {cluster.storage.total_Bps / 1e12:.3g} TB/s in all, "
                        f"{cluster.storage.per_server_Bps / 1e9:.3g} GB/s a server: {cluster.storage.source}"),
            ("source", cluster.description or "-")]
    cap = pcie_cap(cluster)
    if cap:
        rows.insert(5, ("PCIe cap", cap.split(": ", 1)[1]))
    return [{"part": p, "value": v} for p, v in rows]


def _tuner_words(rules) -> str:
    """`2 servers of 1: allgather ring/LL128 from 64 KiB per rank, ...` for the first communicator range."""
    from fabriclab.units import format_size

    first = [r for r in rules if (r.nodes, r.ranks_per_node) == (rules[0].nodes, rules[0].ranks_per_node)]

    def count(lo: int, hi: int) -> str:  # [lo, hi) of whole numbers
        return f"{lo}+" if not hi else str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"

    def size(lo: int, hi: int) -> str:  # [lo, hi) bytes per rank
        return (f"{format_size(lo)}+" if not hi else f"<{format_size(hi)}" if not lo
                else f"{format_size(lo)}-{format_size(hi)}")

    head = f"{count(*rules[0].nodes)} servers of {count(*rules[0].ranks_per_node)} GPUs"
    picks = ", ".join(f"{r.collective} {size(*r.per_rank_bytes)} {r.algorithm}/{r.protocol}" for r in first)
    return f"{head}: {picks}" + ("; other communicator ranges in the file" if len(first) < len(rules) else "")


@app.command("list")
@user_errors
def list_cmd(fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """Every cluster preset: GPU, GPUs per server and per NVLink domain, NICs, network, NCCL, price per GPU."""
    from rich.table import Table

    from fabriclab.plan.catalog import nic_rows, preset_rows

    out = Output(fmt, json_path, store)
    rows = preset_rows()
    table = Table(title="cluster presets (fabriclab cluster show NAME: every number and its source)",
                  title_justify="left")
    for col in ("preset", "GPU", "srv", "NVL", "NIC/GPU", "Gb/s", "NCCL", "$/GPU"):
        table.add_column(col, justify="left" if col in ("preset", "GPU", "NCCL") else "right")
    for r in rows:
        usd = "-" if r["usd_per_gpu"] is None else f"{r['usd_per_gpu']:,.0f}" + ("*" if r["price_kind"] == "estimate"
                                                                                   else "")
        table.add_row(r["preset"], r["gpu"], str(r["gpus_per_server"]), str(r["gpus_per_domain"]),
                      f"{r['nics_per_gpu']:g}", f"{r['nic_Gbps']:g}", r["nccl"], usd)
    out.table(table)
    out.note(textwrap.fill("srv: GPUs per server (compute tray); NVL: GPUs per NVLink domain; Gb/s: per NIC; "
                           "$/GPU: the server (an "
                           "NVL72: the rack) per GPU that plan charges, * an estimate (plan/prices.py gives each "
                           "basis)", width=80, subsequent_indent="  "))
    nics = nic_rows()
    table = Table(title="NICs a plan prices (--nic-rates; plan/prices.py: each price's source)", title_justify="left")
    for col in ("fabric", "Gb/s", "NIC $", "port $", "cable $", "optics $"):
        table.add_column(col, justify="left" if col == "fabric" else "right")
    for r in nics:
        star = "*" if r["estimate"] else ""
        table.add_row(r["fabric"], f"{r['Gbps']:g}", *(f"{r[k]:,.0f}{star}" for k in ("nic", "switch_port", "host_cable",
                                                                                     "switch_cable")))
    out.table(table)
    out.note("* an estimate; the others are the shipped table's own round figures or listings")
    out.record("cluster.list", {}, {"presets": rows, "nics": nics})


@app.command("show")
@user_errors
def show_cmd(cluster: ClusterArgument, fabric: FabricOption = None, bisection: BisectionOption = None,
             nic_rate: NicRateOption = None, fmt: FormatOption = None, json_path: JsonOption = None,
             store: StoreOption = None) -> None:
    """What whatif, plan and simulate take from a cluster: servers, NICs, PCIe, network, library."""
    out = Output(fmt, json_path, store)
    model = _load(cluster, fabric, bisection, nic_rate)
    rows = cluster_rows(model)
    out.note(f"cluster {model.name}")
    for r in rows:  # notes, not a table: a value folds at 80 columns between words, never inside a number
        out.note(textwrap.fill(f"  {r['part']:<16} {r['value']}", width=80, subsequent_indent=" " * 19,
                               break_on_hyphens=False, break_long_words=False))
    out.record("cluster.show", {"cluster": cluster, "fabric": fabric, "bisection": bisection, "nic_rate": nic_rate},
               rows)


@app.command("export")
@user_errors
def export_cmd(cluster: ClusterArgument,
               out_path: Annotated[Path, typer.Option("--out", metavar="FILE", dir_okay=False,
                                                      help="The cluster file to write (JSON).")],
               fabric: FabricOption = None, bisection: BisectionOption = None, nic_rate: NicRateOption = None) -> None:
    """Write a preset (or a file, changed by the options) as a cluster file to edit and pass to --cluster."""
    from fabriclab.fabric.cluster import save_cluster

    check_output_file(out_path, "--out")
    model = _load(cluster, fabric, bisection, nic_rate)
    save_cluster(model, out_path)
    typer.echo(f"cluster {model.name} written to {out_path} (read back by --cluster {out_path})")
