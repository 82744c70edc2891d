"""`fabriclab models`: the model zoo (CNNs) and the LLMs, with parameters and FLOPs; one model's breakdown.

Reads packaged data only (no torch). CNN FLOPs are 2 x multiply-adds of convolutions, fully connected
layers and attention matmuls, per sample at the model's default input (see `fabriclab.workload.zoo`).
LLMs (`fabriclab.workload.transformer`): built-in names or any HuggingFace config.json; their FLOPs are
per token at the model's default sequence length, model FLOPs = 3 x forward (Megatron's MFU convention).
The `--json` record of the list holds the CNN rows and then the LLM rows (`"family": "llm"`).

`--model FILE_OR_DIR` shows an LLM read from a HuggingFace config.json (or a folder holding one) by the reader
`whatif llm --model` and `plan --model` use (`workload.transformer.load_model`).

Try it: `fabriclab models`, `fabriclab models resnet50`, `fabriclab models llama3-70b` or `fabriclab models
--model path/to/config.json`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from fabriclab.cli.common import FormatOption, JsonOption, Output, user_errors
from fabriclab.workload.transformer import TransformerSpec, list_llms, load_model
from fabriclab.workload.zoo import get_spec, layer_table, list_models


# `models` reads packaged data: its listing is no run, so it adds no record to the results store.
STORE_OFF = Path("off")


def count_text(n: float) -> str:
    """A count people read at any size: 672.15B, 70.55B, 3.41M, 210.6k, 512 (never 0.00 billion)."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}" if unit != "k" else f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


def _gflops(flops: float) -> str:
    """GFLOPs to 4 significant digits (481.4), 2 below one (0.0016 for a tiny model, not 0.0)."""
    value = flops / 1e9
    return f"{value:.4g}" if value >= 1 else f"{value:.2g}"


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


def _llm_row(spec: TransformerSpec) -> dict:
    return {"model": spec.name, "family": "llm", "num_layers": spec.num_layers, "hidden_size": spec.hidden_size,
            "num_heads": spec.num_heads, "num_kv_heads": spec.num_kv_heads, "num_experts": spec.num_experts,
            "experts_per_token": spec.experts_per_token, "num_shared_experts": spec.num_shared_experts,
            "num_params": spec.num_params(), "num_active_params": spec.num_active_params(),
            "model_flops_per_token": spec.model_flops_per_token(), "seq_length": spec.seq_length,
            "source": spec.source}


def _print_llms(out: Output, rows: list[dict]) -> None:
    table = Table(title="LLMs (params in B, M, k; GFLOPs: model FLOPs per token at seq, 3 x forward)",
                  title_justify="left")
    for column in ("model", "L", "hidden", "heads", "experts", "params", "active", "GFLOPs", "seq"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in rows:
        experts = f"{r['num_experts']}/{r['experts_per_token']}/{r['num_shared_experts']}" if r["num_experts"] else "-"
        table.add_row(r["model"], str(r["num_layers"]), str(r["hidden_size"]),
                      f"{r['num_heads']}/{r['num_kv_heads']}", experts, count_text(r["num_params"]),
                      count_text(r["num_active_params"]), _gflops(r["model_flops_per_token"]),
                      str(r["seq_length"]))
    out.table(table)
    out.note("L: layers; heads: query/key-value; experts: routed/top-k/shared.\n"
             "`fabriclab models NAME` (or a HuggingFace config.json) breaks one LLM down.")


def _llm_param_rows(spec: TransformerSpec) -> list[dict]:
    moe, dense, L = spec.num_moe_layers, spec.num_dense_layers, spec.num_layers
    parts = [("embedding", 1, spec.embedding_params()), ("attention", L, spec.attention_params()),
             ("norms", L, spec.norm_params()), ("final norm", 1, spec.hidden_size)]
    if dense:
        parts.append(("dense MLP", dense, spec.mlp_params()))
    if moe:
        parts += [(f"experts ({spec.num_experts})", moe, spec.num_experts * spec.expert_params()),
                  ("router", moe, spec.router_params())]
        if spec.num_shared_experts:
            parts.append((f"shared experts ({spec.num_shared_experts})", moe, spec.shared_expert_params()))
    parts.append(("output" + (" (tied)" if spec.tied_embeddings else ""), 1, spec.output_params()))
    return [{"part": p, "layers": n, "params_per_layer": each, "num_params": n * each} for p, n, each in parts]


def _llm_flop_rows(spec: TransformerSpec) -> list[dict]:
    forward = spec.forward_flops_per_token()
    total = sum(forward.values())
    return [{"part": p, "forward_flops_per_token": f, "model_flops_per_token": 3 * f, "share": f / total}
            for p, f in forward.items()]


def _print_llm(out: Output, spec: TransformerSpec) -> dict:
    params, flops = _llm_param_rows(spec), _llm_flop_rows(spec)
    total, active = spec.num_params(), spec.num_active_params()
    title = f"{spec.name}: {total:,} parameters" + (f" ({active:,} active per token)" if spec.is_moe else "")
    table = Table(title=title, title_justify="left")
    for column in ("part", "layers", "per layer", "parameters", "%"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for r in params:
        table.add_row(r["part"], str(r["layers"]), f"{r['params_per_layer']:,}", f"{r['num_params']:,}",
                      f"{100 * r['num_params'] / total:.1f}")
    out.table(table)
    table = Table(title=f"{spec.name}: GFLOPs per token at seq {spec.seq_length}",
                  title_justify="left")
    for column in ("part", "forward", "model (3x)", "%"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for r in (r for r in flops if r["forward_flops_per_token"]):
        table.add_row(r["part"], f"{r['forward_flops_per_token'] / 1e9:.2f}",
                      f"{r['model_flops_per_token'] / 1e9:.2f}", f"{100 * r['share']:.1f}")
    table.add_row("total", f"{spec.model_flops_per_token() / 3e9:.2f}", f"{spec.model_flops_per_token() / 1e9:.2f}",
                  "100.0")
    out.table(table)
    out.note(textwrap.fill(f"source: {spec.source}", width=80))
    return {"spec": _llm_row(spec), "params": params, "flops": flops}


def _is_llm(name: str) -> bool:
    """Whether `name` names an LLM (built-in or a config.json path); a ValueError lists every model when it
    names nothing."""
    if name in list_models():
        return False
    if name in list_llms() or name.endswith(".json") or Path(name).exists():
        return True
    raise ValueError(f"unknown model {name!r}; known models: {', '.join(list_models())}; LLMs: "
                     f"{', '.join(list_llms())} (or the path of a HuggingFace config.json)")


@user_errors
def models_cmd(
    name: Optional[str] = typer.Argument(None, help="Show this model's layer table, or an LLM's (name or "
                                                    "HuggingFace config.json) parameters and FLOPs."),
    model: Optional[str] = typer.Option(None, "--model", metavar="FILE|DIR|NAME", help=(
        "Show the LLM `whatif llm --model` and `plan --model` read: a HuggingFace config.json, a folder holding "
        "one, or a built-in LLM (its parameters and FLOPs).")),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
) -> None:
    """List the model zoo (parameters, MB, GFLOPs per sample) and the LLMs; or one model's breakdown.

    A listing of packaged data, not a run: nothing goes to the results store (--json writes the rows)."""
    out = Output(fmt, json_path, STORE_OFF)
    if model is not None:
        if name is not None:
            raise ValueError(f"give one model: {name!r} or --model {model!r}")
        out.record("models.llm", {"model": model}, _print_llm(out, load_model(model)))
        return
    if name is None:
        rows = _zoo_rows()
        llms = [_llm_row(load_model(n)) for n in list_llms()]
        _print_zoo(out, rows)
        _print_llms(out, llms)
        out.record("models", {}, rows + llms)
        return
    if _is_llm(name):
        spec = load_model(name)
        out.record("models.llm", {"model": name}, _print_llm(out, spec))
        return
    rows = _print_layers(out, name)
    out.record("models.layers", {"model": name}, rows)


def register(app: typer.Typer) -> None:
    """Add the top-level `models` command to `app`."""
    app.command("models")(models_cmd)
