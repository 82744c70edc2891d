"""What frees a job's GPU memory: the options that would, each tried on the memory model.

When a job does not fit (or only may), `whatif llm` and `calibrate step` name what to change. A kind of
option is no advice: `--recompute selective` frees nothing under flash attention (its default keeps what
flash attention keeps), a larger `--pp` may not divide the batch. So each candidate is applied to the job
(`ParallelConfig`, `MemoryOptions`), checked as every command checks a job (`workload/job.py`), its most
loaded GPU's memory computed (`workload/memory.py`), and only those that free at least `MIN_FREED_BYTES`
are named, most freed first, each with what it frees:

* the next ZeRO stage; bf16 gradients (`--grad-dtype bf16`, Megatron-Bridge's recipes);
* selective recomputation of Megatron-Core's output-discarding modules the model has (`layernorm`,
  `moe_act`, `mla_up_proj`), or full recomputation;
* activation offloading of half of each model chunk's layers (`--offload-activations`);
* twice the TP, PP or EP, half the micro-batch.

Try it: `fabriclab whatif llm --model llama3-70b --cluster gb200-nvl72 --gpus 64 --tp 1 --zero 3 --seq 8192
--gbs 256` (does not fit: the advice names what frees how much).
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.workload.job import job_problem
from fabriclab.workload.memory import MemoryOptions, memory_per_gpu
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

MIN_FREED_BYTES = 0.5e9  # below it an option is no answer to a GPU that is short
MOST_SHOWN = 4


def _candidates(spec: TransformerSpec, par: ParallelConfig, options: MemoryOptions):
    """(option text, ParallelConfig, MemoryOptions) of every change worth trying (module doc)."""
    if par.zero < 3:
        yield f"--zero {par.zero + 1}", replace(par, zero=par.zero + 1), options
    if options.grad_bytes > 2:
        yield "--grad-dtype bf16", par, replace(options, grad_bytes=2)
    cheap = [m for m, has in (("layernorm", True), ("moe_act", spec.is_moe), ("mla_up_proj", spec.is_mla)) if has]
    if par.recompute != "full":
        modules = tuple(dict.fromkeys((*par.recompute_modules, *cheap)))
        if par.recompute == "none" or modules != par.recompute_modules:
            yield (f"--recompute selective --recompute-modules {','.join(modules)}",
                   replace(par, recompute="selective", recompute_modules=modules), options)
        yield "--recompute full", replace(par, recompute="full", recompute_modules=()), options
    chunk = spec.num_layers // (par.pp * par.vp)
    if chunk > 1 and par.offload_layers < chunk // 2:
        yield f"--offload-activations {chunk // 2}", replace(par, offload_layers=chunk // 2), options
    for name in ("tp", "pp", "ep"):
        if name == "ep" and not spec.is_moe:
            continue
        yield f"--{name} {2 * getattr(par, name)}", {name: 2 * getattr(par, name)}, options
    if par.mbs > 1:
        yield f"--mbs {par.mbs // 2}", {"mbs": par.mbs // 2}, options


def _job(spec: TransformerSpec, par: ParallelConfig, change) -> ParallelConfig | None:
    """`change` applied to `par` (a ParallelConfig already, or fields to replace), None when no command would
    run it."""
    try:
        new = change if isinstance(change, ParallelConfig) else replace(par, **change)
    except ValueError:
        return None
    return new if job_problem(spec, new) is None else None


def freed(spec: TransformerSpec, par: ParallelConfig, *, shard_group: int = 0,
          options: MemoryOptions = MemoryOptions()) -> list[tuple[str, float]]:
    """(option, bytes it frees on the most loaded GPU) of every candidate that frees any, most first."""
    need = memory_per_gpu(spec, par, shard_group=shard_group, options=options).total_bytes
    out = []
    for text, change, opts in _candidates(spec, par, options):
        new = _job(spec, par, change)
        if new is None:
            continue
        group = shard_group if shard_group and (new.dp * new.cp) % shard_group == 0 else 0
        try:
            less = need - memory_per_gpu(spec, new, shard_group=group, options=opts).total_bytes
        except ValueError:  # more model chunks than layers
            continue
        if less >= MIN_FREED_BYTES:
            out.append((text, less))
    return sorted(out, key=lambda tl: -tl[1])


def memory_advice(spec: TransformerSpec, par: ParallelConfig, *, shard_group: int = 0,
                  options: MemoryOptions = MemoryOptions()) -> str:
    """The options that free memory on this job, most first, with what each frees (module doc); what to
    look at when none does."""
    found = freed(spec, par, shard_group=shard_group, options=options)[:MOST_SHOWN]
    if not found:
        return "more GPUs, or GPUs with more memory (no single option of this job frees 0.5 GB)"
    return ", ".join(f"{text} (frees {less / 1e9:.1f} GB)" for text, less in found)
