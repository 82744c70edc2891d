"""One validation of an LLM job: a model (`TransformerSpec`) split as a `ParallelConfig`.

Each half is checked on its own when it is built (`TransformerSpec.__post_init__`: the model's shapes;
`ParallelConfig.__post_init__`: the split's arithmetic and the counts that finish here). What neither can
see alone is checked here, once: whether this model splits this way. Every command that takes a job calls
`check_job` (whatif llm, calibrate step and bench astra-sim through `cli/llm_options.LlmJob`, the plan's
search through `plan/llm/space.enumerate_configs`, the transformer trainer through
`runtime/llm/model.check_model`), so a split one of them refuses the others refuse too, with the same
message: the simulator used to accept `--ep 2` on a dense model (and answer as for EP 1), 8 experts over
`--ep 3` and 20 heads over `--tp 8`, which the trainer refused. What only one of them cannot run (the
trainer: context parallelism, fp8, a vocabulary that TP does not divide) it checks after this.

Try it: `fabriclab whatif llm --model llama3-8b --gpus 64 --ep 2` (one error line: llama3-8b is dense).
"""

from __future__ import annotations

import math

from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec


def check_job(spec: TransformerSpec, par: ParallelConfig) -> None:
    """A ValueError that says what to change when `spec` cannot be split as `par`."""
    problem = job_problem(spec, par)
    if problem is not None:
        raise ValueError(problem)


def job_problem(spec: TransformerSpec, par: ParallelConfig) -> str | None:
    """Why `spec` cannot be split as `par` (the message `check_job` raises), or None when it can.

    The rules are Megatron-Core's (megatron/core/transformer/transformer_config.py and its parallel state):
    the attention heads and the key/value heads (query groups) split over TP, the routed experts split over
    EP, expert parallelism needs experts, and sequence parallelism splits the sequence over TP."""
    if spec.num_heads % par.tp or spec.num_kv_heads % par.tp:
        return (f"{spec.name}: {spec.num_heads} attention heads and {spec.num_kv_heads} key/value heads must split "
                f"over --tp {par.tp} (each TP rank holds whole heads): use --tp "
                f"{_choices(_common_divisors(spec.num_heads, spec.num_kv_heads))}")
    if par.ep * par.etp > 1 and not spec.is_moe:
        what = f"--ep {par.ep}" if par.ep > 1 else f"--etp {par.etp}"
        return (f"{what} needs an MoE model (e.g. mixtral-8x7b, moe-tiny); {spec.name} is dense (no "
                f"experts to split): use --ep 1 --etp 1")
    if spec.is_moe and spec.num_experts % par.ep:
        return (f"{spec.name}: its {spec.num_experts} experts do not split over --ep {par.ep} (each EP rank holds "
                f"the same number of experts): use --ep {_choices(_common_divisors(spec.num_experts))}")
    if par.sequence_parallel and par.tp > 1 and par.seq % par.tp:
        return (f"--seq {par.seq} must be a multiple of --tp {par.tp} with sequence parallelism (it splits the "
                f"sequence over the TP ranks): change --seq, or give --no-sequence-parallel")
    return _memory_problem(spec, par)


def _memory_problem(spec: TransformerSpec, par: ParallelConfig) -> str | None:
    """Recompute modules the model lacks (Megatron-Core refuses moe_act without grouped experts and mla_up_proj
    without multi-head latent attention) and offloading of more layers than a model chunk holds."""
    lacks = {"moe_act": not spec.is_moe, "moe": not spec.is_moe, "mla_up_proj": not spec.is_mla}
    missing = [m for m in par.recompute_modules if lacks.get(m)]
    if missing:
        return (f"--recompute-modules {','.join(missing)}: {spec.name} has no such module (moe_act and moe need "
                f"experts, mla_up_proj multi-head latent attention); drop {'it' if len(missing) == 1 else 'them'}")
    fewest = spec.num_layers // (par.pp * par.vp)
    if par.offload_layers and par.offload_layers >= fewest:
        return (f"--offload-activations {par.offload_layers}: a model chunk holds {fewest} layers (of {spec.num_layers} "
                f"over pp x vp = {par.pp * par.vp}) and its last one's activations are used at once; offload at "
                f"most {max(fewest - 1, 0)} layers per chunk")
    return None


def _common_divisors(*numbers: int) -> list[int]:
    """The divisors of the numbers' greatest common divisor (found up to its square root: a config.json may
    hold any size)."""
    g = math.gcd(*numbers)
    small = [d for d in range(1, math.isqrt(g) + 1) if g % d == 0]
    return sorted({*small, *(g // d for d in small)})


def _choices(values: list[int]) -> str:
    """`1, 2, 4 or 8` (the first and last few when there are many)."""
    shown = values if len(values) <= 6 else [*values[:4], values[-1]]
    text = ", ".join(map(str, shown[:-1]))
    sep = ", ... or " if len(values) > 6 else " or "
    return f"{text}{sep}{shown[-1]}" if len(shown) > 1 else str(shown[0])
