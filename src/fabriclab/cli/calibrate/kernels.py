"""`fabriclab calibrate kernels`: the kernel model of a GPU (GEMMs by shape, flash attention, memory-bound
passes) fitted to a measured kernel table, written into a cluster file that `whatif llm`, `plan` and
`calibrate step` then use (`fabric/kernels.py`, `fabric/kernel_fit.py`).

Try it: `fabriclab calibrate kernels --table docs/measurements/h100-2026-11-27/kernels.csv --cluster dgx-h100
--out h100-kernels.json`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, check_output_file, user_errors
from fabriclab.cli.options import ClusterOption, load_cluster_option


def register(app: typer.Typer) -> None:
    @app.command("kernels")
    @user_errors
    def kernels_cmd(table: Annotated[Path | None, typer.Option(
                        "--table", metavar="CSV", dir_okay=False,
                        help="Kernel table (gpu,op,dtype,M,N,K,seconds); default: the shipped H200 one.")] = None,
                    cluster: ClusterOption = None,
                    out: Annotated[Path | None, typer.Option(
                        "--out", metavar="PATH", dir_okay=False,
                        help="Cluster file to write with the fitted kernel model (JSON).")] = None,
                    fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
        """Fit the GPU's kernel speeds by shape to a measured kernel table."""
        from dataclasses import replace

        from fabriclab.fabric.cluster import ComputeSpec, cluster_gpu, save_cluster
        from fabriclab.fabric.kernel_fit import (fit_kernel_table, kernel_spread, read_kernel_table,
                                                 shipped_table, spread_summary, table_gpu)

        if out is not None:
            check_output_file(out, "--out")
        output = Output(fmt, json_path, store)
        path = table or shipped_table()
        the_cluster = load_cluster_option(cluster or "dgx-h100")
        gpu = cluster_gpu(the_cluster)
        rows = read_kernel_table(path)
        measured = table_gpu(rows, gpu)  # the GPU the times ran on: its peak, not the cluster's (same generation)
        model = fit_kernel_table(rows, measured)
        model = replace(model, source=f"fit of {path.name} on {measured.name}")
        summary = spread_summary(kernel_spread(model, rows, measured))
        _print(output, model, summary, measured.name)
        if measured is not gpu:
            output.note(f"fitted on the table's GPU, {measured.name}; its shares of peak carry to the cluster's "
                        f"{gpu.name} (one generation)")
        if out is not None:
            compute = the_cluster.compute or ComputeSpec(gpu=gpu)
            save_cluster(replace(the_cluster, compute=replace(compute, kernels=model)), out)
            output.note(f"cluster written to {out}: `whatif llm --cluster {out}` times kernels by this fit")
        output.record("calibrate.kernels", {"table": str(path), "cluster": cluster or "dgx-h100",
                                            "out": str(out) if out else None},
                      {"kernels": model.to_dict(), "spread": summary, "gpu": gpu.name, "table_gpu": measured.name})


def _print(output: Output, model, summary: list[dict], gpu_name: str) -> None:
    params = Table(title=f"kernel model of {gpu_name}", title_justify="left")
    for col in ("parameter", "value"):
        params.add_column(col)
    for p, share in model.gemm_share.items():
        params.add_row(f"GEMM {p}: share of peak", f"{share:.4f}")
        params.add_row(f"GEMM {p}: K-loop cost k0", f"{model.gemm_k0[p]:g}")
    for name, value in (("128x128 tile: relative speed", model.small_tile_share),
                        ("attention fwd: share of bf16 peak", model.attention_share),
                        ("attention bwd: share of bf16 peak", model.attention_backward_share),
                        ("memory-bound: share of bandwidth", model.copy_share)):
        params.add_row(name, f"{value:.4f}")
    params.add_row("latency per kernel (us)", f"{model.latency_s * 1e6:.2f}")
    params.add_row("range (rms, kernels >= 1e11 FLOPs)", f"{model.error:.1%}")
    output.table(params)
    spread = Table(title="model / measured time (log spread)", title_justify="left")
    for col in ("kernels", "rows", "rms", "large", "rms large", "bias large"):
        spread.add_column(col, justify="left" if col == "kernels" else "right")
    for r in summary:
        spread.add_row(r["kernels"], str(r["rows"]), f"{r['rms_all']:.1%}", str(r["large_rows"]),
                       "-" if math.isnan(r["rms_large"]) else f"{r['rms_large']:.1%}",
                       "-" if math.isnan(r["median_large"]) else f"{r['median_large']:+.1%}")
    output.table(spread)
