"""`fabriclab cluster show|export`: a cluster preset (or file) as the simulators see it, and as a file to edit.

`show` prints its servers (GPUs, internal fabric, NICs and the PCIe path to them, with the cap a PCIe path
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

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, check_output_path, user_errors
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
    from fabriclab.plan.llm.cluster import pcie_cap

    s, n, lib, gpu = cluster.server, cluster.network, cluster.library, cluster_gpu(cluster)
    peaks = ", ".join(f"{k} {v / 1e12:,.0f}" for k, v in gpu.peak_flops.items())
    rows = [("servers", f"{s.gpus_per_server} x {gpu.name} ({gpu.memory_bytes / 1e9:.1f} GB, "
                        f"{gpu.memory_bandwidth_Bps / 1e12:.2f} TB/s)"),
            ("peak TFLOP/s", peaks),
            ("inside a server", f"{s.intra}, {s.intra_bandwidth_Bps / 1e9:.4g} GB/s per GPU a direction"),
            ("NICs", f"{s.nics_per_server} x {s.nic_bandwidth_Bps * 8 / 1e9:g} Gb/s per server, "
                     f"{s.nic_efficiency:.3g} of line rate reached"),
            ("GPU-NIC PCIe", f"{s.pcie_bandwidth_Bps / 1e9:.1f} GB/s ({s.pcie_bandwidth_Bps * 8 / 1e9:.0f} Gb/s) "
                             f"a direction"),
            ("network", f"{n.fabric}, bisection {n.bisection:g}, {n.leaf_ports} ports per leaf"),
            ("library", f"{lib.name} {lib.nccl_version}, {lib.num_channels} channels"),
            ("source", cluster.description or "-")]
    cap = pcie_cap(cluster)
    if cap:
        rows.insert(5, ("PCIe cap", cap.split(": ", 1)[1]))
    return [{"part": p, "value": v} for p, v in rows]


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

    check_output_path(out_path, "--out")
    model = _load(cluster, fabric, bisection, nic_rate)
    save_cluster(model, out_path)
    typer.echo(f"cluster {model.name} written to {out_path} (read back by --cluster {out_path})")
