"""`fabriclab models`: the model zoo with parameter counts, sizes and forward FLOPs; one model's layers.

Reads the packaged layer tables only (no torch). FLOPs are 2 x multiply-adds of convolutions, fully
connected layers and attention matmuls, per sample at the model's default input (see
`fabriclab.workload.zoo`).

Try it: `fabriclab models` or `fabriclab models resnet50`.
"""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    user_errors,
)
from fabriclab.workload.zoo import get_spec, layer_table, list_models


def _zoo_rows() -> list[dict]:
    rows = []
    for name in list_models():
        table = layer_table(name)
        rows.append({"model": name, "input_shape": list(table.input_shape), "num_params": table.num_params,
                     "param_bytes": table.param_bytes, "num_layers": len(table.layers),
                     "num_param_layers": sum(1 for layer in table.layers if layer.num_params),
                     "forward_flops": table.forward_flops, "description": get_spec(name).description})
    return rows


def _print_zoo(out: Output, rows: list[dict]) -> None:
    table = Table(title="model zoo (FLOPs: 2 x multiply-adds per sample, forward)", title_justify="left")
    for column in ("model", "input", "parameters", "MB (fp32)", "GFLOPs/sample", "layers", "description"):
        table.add_column(column, justify="left" if column in ("model", "input", "description") else "right")
    for row in rows:
        table.add_row(row["model"], "x".join(map(str, row["input_shape"])), f"{row['num_params']:,}",
                      f"{row['param_bytes'] / 1e6:.2f}", f"{row['forward_flops'] / 1e9:.3f}",
                      f"{row['num_param_layers']}/{row['num_layers']}", row["description"])
    out.table(table)
    out.note("layers: with parameters / all leaf modules. `fabriclab models NAME` lists one model's layers.")


def _print_layers(out: Output, name: str) -> list[dict]:
    model = layer_table(name)
    table = Table(title=model.summary(), title_justify="left")
    for column in ("#", "layer", "parameters", "bytes", "MFLOPs/sample"):
        table.add_column(column, justify="left" if column == "layer" else "right")
    rows = []
    for i, layer in enumerate(model.layers):
        table.add_row(str(i), layer.name, f"{layer.num_params:,}", f"{layer.param_bytes:,}",
                      f"{layer.forward_flops / 1e6:.2f}")
        rows.append({"name": layer.name, "num_params": layer.num_params, "param_bytes": layer.param_bytes,
                     "forward_flops": layer.forward_flops})
    out.table(table)
    return rows


@user_errors
def models_cmd(
    name: Optional[str] = typer.Argument(None, help="Show this model's layer table (see the list)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """List the model zoo: parameters, MB (fp32) and forward GFLOPs per sample; or one model's layers."""
    out = Output(fmt, json_path, store)
    if name is None:
        rows = _zoo_rows()
        _print_zoo(out, rows)
        out.record("models", {}, rows)
        return
    get_spec(name)
    rows = _print_layers(out, name)
    out.record("models.layers", {"model": name}, rows)


def register(app: typer.Typer) -> None:
    """Add the top-level `models` command to `app`."""
    app.command("models")(models_cmd)
