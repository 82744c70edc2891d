"""`fabriclab train --model gpt-tiny|moe-tiny|config.json ...`: the parallel transformer trainer
(`runtime/llm`), reached from `train` when the model is a transformer.

The LLM job's options are `whatif llm`'s (`cli/llm_options`, Megatron-LM's names: --tp --pp --vp --ep
--mbs --gbs --seq --sequence-parallel --zero), the ranks are `--np`. Prints the loss and time of every
step, then where the busiest rank's step went (compute, TP, EP, PP, DP, optimizer, bubble) with the bytes
each communicator sent per step; `--trace PATH` writes the last step of every rank as a Perfetto trace in
the simulator's format; the record holds all of it.

Try it: `fabriclab train --model gpt-tiny --np 8 --tp 2 --pp 2 --gbs 16 --zero 1 --steps 5 --trace step.json`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from fabriclab.cli.common import EXIT_FAILED, Output, print_error, write_trace_file
from fabriclab.cli.options import parse_count

SeedOption = Annotated[int, typer.Option(help="Seed of the weights and data (transformer models).")]
DtypeOption = Annotated[str, typer.Option(help="Transformer math: float32, float64 or bfloat16.")]
LLM_DEFAULTS = {"tp": "1", "pp": "1", "vp": "1", "ep": "1", "mbs": "1", "gbs": None, "seq": None, "zero": "0",
                "seed": 0, "dtype": "float32"}


def is_transformer(model: str) -> bool:
    from fabriclab.workload.transformer import list_llms

    path = Path(model)
    return model in list_llms() or model.endswith(".json") or (path.is_dir() and (path / "config.json").is_file())


def route(o: dict, trace: Path | None, out: Output) -> None:
    """Train a transformer and exit; for a CNN check no transformer option was given and default --lr."""
    if is_transformer(o["model"]):
        raise typer.Exit(execute(build_config(o), trace, out))
    check_not_given(o)
    o["lr"] = 0.01 if o["lr"] is None else o["lr"]


def check_not_given(o: dict) -> None:
    """A CNN run given a transformer-only option: say so."""
    given = [k for k, v in LLM_DEFAULTS.items() if o.get(k) != v]
    if given:
        raise ValueError(f"--{' --'.join(given)}: options of transformer models (gpt-tiny, moe-tiny, a "
                         f"config.json); {o['model']} is a CNN")


def build_config(o: dict):
    """The `LlmTrainConfig` of the parsed command line `o` (a ValueError says what to change)."""
    from fabriclab.cli.llm_options import LlmJob
    from fabriclab.runtime.llm.dp import AdamConfig
    from fabriclab.runtime.llm.trainer import LlmTrainConfig

    if o["num_ranks"] < 1:
        raise ValueError(f"--np {o['num_ranks']}: give at least 1 rank")
    split = parse_count(o["tp"], "--tp") * parse_count(o["pp"], "--pp")
    if o["num_ranks"] % split:
        raise ValueError(f"--np {o['num_ranks']} is not a multiple of --tp x --pp = {split}")
    job = LlmJob.from_options(o["model"], str(o["num_ranks"]), o["tp"], o["pp"], o["vp"], "1", o["ep"], o["mbs"],
                              o["gbs"], o["seq"], o["sequence_parallel"], o["zero"], "none", "bf16", "tp-cp-dp-pp")
    check_host(job, o["dtype"].strip().lower(), o["device"])
    adam = AdamConfig(lr=1e-3 if o["lr"] is None else o["lr"])
    return LlmTrainConfig(spec=job.spec, par=job.par, steps=o["steps"], warmup=o["warmup"], seed=o["seed"],
                          dtype=o["dtype"].strip().lower(), adam=adam, device=o["device"], backend=o["backend"],
                          timeout_s=o["timeout"], keep_spans=o["trace"] is not None)


# Bytes of one element of the trainer's dtypes (an unknown dtype is refused by LlmTrainConfig).
DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2}


def check_host(job, dtype: str, device: str = "cpu") -> None:
    """Before a rank starts: the ranks this host runs fit its cores and memory. On the CPU each rank holds its
    weights, gradients and Adam state (`workload/memory.trainer_state_bytes`) in host memory, beside a process
    with torch loaded; a 0.6e9-parameter-per-rank job used to start on 8 GB and swap. On a GPU the state lives
    in the GPU's memory: only the processes are counted."""
    from fabriclab.bench.limits import RANK_MEMORY_BYTES, check_local_ranks, check_memory
    from fabriclab.runtime.environment import detect_launch
    from fabriclab.workload.memory import trainer_state_bytes

    launch = detect_launch()
    here = job.par.num_gpus if launch is None else (launch.local_world_size or 1)
    if launch is None:
        check_local_ranks(here)
    per_rank = trainer_state_bytes(job.spec, job.par, DTYPE_BYTES.get(dtype, 4)) if device == "cpu" else 0.0
    check_memory(here * (per_rank + RANK_MEMORY_BYTES),
                 f"{here} rank{'s' if here > 1 else ''} of {job.spec.name} on this host ({per_rank / 1e9:.1f} GB of "
                 f"weights, gradients and Adam state in {dtype} each, with ZeRO-{job.par.zero})",
                 "use more --tp/--pp, --zero 1 or more, a smaller model or --dtype bfloat16, or fewer ranks here")


def execute(config, trace: Path | None, out: Output) -> int:
    """Run, print, write the trace and the record; returns the exit code."""
    from fabriclab.runtime.environment import LaunchError
    from fabriclab.runtime.llm.summary import describe
    from fabriclab.runtime.llm.trainer import run_llm_train

    out.note(f"training {config.spec.name}: {describe(config.par, config.dtype)}, {config.steps} steps "
             f"(+{config.warmup} warm-up) on {config.device}")
    try:
        result = run_llm_train(config)
    except LaunchError as exc:
        print_error(exc)
        return EXIT_FAILED
    if not result:
        return 0  # a non-reporting rank of a cluster launch
    spans = result.pop("spans")
    out.table(step_table(result, config))
    out.table(split_table(result))
    code = 0
    if trace is not None:
        code = write_trace(trace, spans, config)
    out.record("train.llm", {"model": config.spec.name, "parallel": asdict(config.par), "steps": config.steps,
                             "warmup": config.warmup, "seed": config.seed, "dtype": config.dtype,
                             "adam": asdict(config.adam), "device": config.device}, result,
               top={"step_time_s": result["step_time_s"], "tokens_per_s": result["tokens_per_s"],
                    "final_loss": result["losses"][-1]})
    return code


def step_table(result: dict, config) -> Table:
    table = Table(title=f"{result['model']}, {result['parallel']}: loss per step", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for h in ("step", "loss", "step ms"):
        table.add_column(h, justify="right", no_wrap=True)
    times = [None] * config.warmup + result["step_times_s"]
    for i, (loss, t) in enumerate(zip(result["losses"], times)):
        table.add_row(str(i + 1) + ("" if t is not None else " (warm-up)"), f"{loss:.6f}",
                      "-" if t is None else f"{t * 1e3:.2f}")
    return table


def split_table(result: dict) -> Table:
    step = result["step_time_s"]
    table = Table(title=f"median step {step * 1e3:.2f} ms, {result['tokens_per_s']:.0f} tokens/s; busiest rank "
                        f"{result['busiest_rank']}, per step", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for h in ("part", "ms", "share", "MB sent"):
        table.add_column(h, justify="left" if h == "part" else "right", no_wrap=True)
    for part, seconds in result["split_s"].items():
        sent = result["bytes_per_step"].get(part)
        table.add_row(part, f"{seconds * 1e3:.2f}", f"{seconds / step:.1%}",
                      "-" if sent is None else f"{sent / 1e6:.3f}")
    return table


def write_trace(path: Path, spans: dict, config) -> int:
    """Every rank's last step in the simulator's trace format (`runtime/llm/trace.py`)."""
    from fabriclab.runtime.llm.trace import measured_trace
    from fabriclab.runtime.llm.summary import describe

    title = f"{config.spec.name}, {describe(config.par, config.dtype)}"
    return write_trace_file(path, measured_trace({int(r): s for r, s in spans.items()}, title),
                            f"trace written to {path} (the last step of {len(spans)} ranks)")
