"""`fabriclab profile kernels`: measure this GPU's kernel table (`bench/kernels.py`) for `fabriclab calibrate
kernels`: measure one GPU, predict the cluster.

Try it: `fabriclab profile kernels --out kernels.csv && fabriclab calibrate kernels --table kernels.csv
--cluster dgx-h100 --out mine.json && fabriclab whatif llm --cluster mine.json`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, check_output_path, user_errors


def register(app: typer.Typer) -> None:
    @app.command("kernels")
    @user_errors
    def kernels_cmd(out: Annotated[Path, typer.Option("--out", metavar="CSV", dir_okay=False,
                                                      help="Kernel table to write.")],
                    device: Annotated[str, typer.Option(help="cuda, cuda:N, or cpu (with --quick).")] = "cuda",
                    budget: Annotated[float, typer.Option("--budget", metavar="SECONDS",
                                                          help="Time for the GEMM shapes.")] = 120.0,
                    quick: Annotated[bool, typer.Option("--quick", help="A few small shapes (to try the "
                                                                          "harness, e.g. on a CPU).")] = False,
                    fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
        """Measure GEMMs by shape, causal attention and copies on this GPU: a kernel table."""
        import re

        from fabriclab.bench.kernels import measure_kernels, write_table

        check_output_path(out, "--out")
        if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", device):
            raise ValueError(f"--device {device!r}: use cuda, cuda:N or cpu")
        if device == "cpu" and not quick:
            raise ValueError("--device cpu measures a CPU, not a GPU: add --quick to try the harness")
        if not 0 < budget <= 3600:
            raise ValueError(f"--budget {budget:g}: give seconds in (0, 3600]")
        output = Output(fmt, json_path, store)
        rows = measure_kernels(device, budget_s=budget, quick=quick,
                               progress=lambda text: print(f"  {text} ...", file=sys.stderr, flush=True))
        write_table(rows, out)
        table = Table(title=f"kernel table of {rows[0]['gpu']}: {len(rows)} rows in {out}", title_justify="left")
        for col in ("kernels", "rows", "best TFLOP/s"):
            table.add_column(col, justify="left" if col == "kernels" else "right")
        for op, dtype in sorted({(r["op"], r["dtype"]) for r in rows}):
            mine = [r for r in rows if (r["op"], r["dtype"]) == (op, dtype)]
            best = max((r["tflops"] for r in mine if r["tflops"] == r["tflops"]), default=float("nan"))
            table.add_row(f"{op} {dtype}", str(len(mine)), "-" if best != best else f"{best:,.1f}")
        output.table(table)
        output.note(f"next: fabriclab calibrate kernels --table {out} --cluster CLUSTER --out FILE")
        output.record("profile.kernels", {"device": device, "budget_s": budget, "quick": quick, "out": str(out)},
                      {"gpu": rows[0]["gpu"], "rows": len(rows)})
