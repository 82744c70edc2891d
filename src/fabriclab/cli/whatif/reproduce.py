"""`fabriclab whatif reproduce`: the what-if table, compression answer and conclusions of Zhang et al.,
"Is Network the Bottleneck of Distributed Training?" (NetAI'20).

From the V100 logs shipped with fabriclab (the paper's repository): the scaling factor of ResNet50,
ResNet101 and VGG16 at 1-100 Gbps and 16/32/64 workers; the compression ratio each needs at 10 Gbps
for 0.9 and 0.99; the paper's conclusions checked; and how other fusion policies and algorithms change
the answer (computed by `whatif.reproduce`). Writes `whatif_reproduced.md`, `whatif_reproduced.csv` and
plots to `--out` (`report.whatif`).

Try it: `fabriclab whatif reproduce --out results/whatif`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_dir,
    user_errors,
)
from fabriclab.report.whatif import REPORT_CSV, REPORT_MD, write_reproduction
from fabriclab.whatif.reproduce import reproduce


def build_report(out: Path) -> tuple[str, list[dict], float]:
    """Reproduce the what-if and write it into `out`: (the Markdown, the sweep's rows, the sweep's seconds)."""
    rep = reproduce()
    return write_reproduction(out, rep), rep.rows, rep.sweep_s


def register(app: typer.Typer) -> None:
    @app.command("reproduce")
    @user_errors
    def reproduce_cmd(out: Path = typer.Option(Path("results/whatif"), help="Folder for the report, CSV and plots."),
                      fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
        """Zhang et al.'s (NetAI'20) what-if table, compression answer and conclusions from the V100 logs."""
        output = Output(fmt, json_path, store)
        check_output_dir(out)
        text, rows, sweep_s = build_report(out)
        output.note(text)
        output.note(f"written: {out / REPORT_MD}, {out / REPORT_CSV}, plots in {out}")
        output.record("whatif.reproduce", {"out": str(out)}, {"sweep_s": sweep_s, "rows": rows})
