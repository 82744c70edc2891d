"""The parallel configurations an LLM plan searches, as Megatron-LM / NeMo allow them, pruned by memory.

For a model on N GPUs in servers of g GPUs (`enumerate_configs`):

* TP in {1, 2, 4, 8, 16, 32, 64, 72}, at most g and dividing it (tensor parallelism stays in the NVLink
  domain: a server of 8, or the GPUs a job uses of an NVL72 rack, `fabric/domains.py`), dividing the
  attention heads and the key/value heads (Megatron's query groups);
* CP in {1, 2, 4, 8} for long sequences: each rank keeps at least `MIN_TOKENS_PER_CP_RANK` tokens and the
  sequence splits into 2 x CP equal chunks (Megatron's load-balanced causal split);
* PP in 1 .. 32 dividing N / (TP x CP), with at least `MIN_LAYERS_PER_STAGE` layers per stage; an uneven
  split (126 layers on 16 stages, as Llama 3 405B was trained) is costed as it falls;
* VP (interleaved 1F1B) in `VP_CHOICES` only when PP > 1, the layers divide into PP x VP whole chunks, or
  do with the embedding and the loss counted as a layer each (Meta's uneven split of Llama 3 405B, as `whatif
  llm` runs it: `workload/parallel.layers_of_chunks`), and the micro-batches per pipeline are a multiple of
  PP (Megatron's conditions);
* for MoE models the experts' grid folded over a stage's TP x CP x DP GPUs (`workload/parallel.py`): ETP 1
  (Megatron-Bridge's) or TP (Megatron-LM's default), and EP a divisor of the experts (at most `MAX_EP`) with
  ETP x EP dividing TP x CP x DP; 1 and 1 for dense models;
* only configurations whose groups fill whole servers (domains) or stay in one (`ParallelConfig.uneven_group`);
* MBS in {1, 2, 4} with the global batch a multiple of MBS x DP;
* ZeRO-1 (Megatron's distributed optimizer), and ZeRO-3 (FSDP) too when PP = 1 and the model has at most
  `ZERO3_MAX_PARAMS` parameters;
* recomputation none, selective or full; sequence parallelism whenever TP > 1.

Each configuration with TP communication is simulated with TP overlap on and off, and keeps the faster
(`plan/llm/evaluator.py`).

`SearchBounds` (`plan --tp 4`, `--pp 2-8`, `--ep 8,16`, `--zero 1,3`) keeps TP, PP and EP to the values
given among those choices, and replaces the ZeRO stages tried with those given (any of 0-3, with or
without PP).

`fit_configs` keeps the configurations whose most loaded GPU fits the GPU's memory by the check `whatif
llm` makes (`workload.memory.check_fits`: refused only when even the low end of the model's range plus
the reserve exceeds the GPU; `memory_needs`: `memory_per_gpu`, computed once for all clusters); those
that fit for sure (the high end too) when there are any, else the marginal ones with their warning, and
remembers the smallest need it saw for the message when none fits: memory costs ~0.2 ms a configuration,
a simulation ~50 x more, so nothing that does not fit is simulated.

Try it: `python -c "from fabriclab.plan.llm.space import enumerate_configs; from fabriclab.workload.transformer
import load_model; print(len(enumerate_configs(load_model('llama3-70b'), 1024, 8, gbs=1024, seq=8192)))"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.workload.job import job_problem
from fabriclab.workload.memory import MemoryOptions, check_fits, memory_per_gpu
from fabriclab.workload.parallel import MAX_PIPELINE_PASSES, ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

TP_CHOICES = (1, 2, 4, 8, 16, 32, 64, 72)  # up to an NVL72 domain; the heads and the domain bound it
CP_CHOICES = (1, 2, 4, 8)
MAX_PP = 32
VP_CHOICES = (2, 3, 4, 5, 6, 8, 12)  # Megatron-Bridge's recipes run 2, 3, 4, 5, 8 and 12
MBS_CHOICES = (1, 2, 4)
RECOMPUTE_CHOICES = ("none", "selective", "full")
# A context-parallel rank keeps at least this many tokens: below it the ring's per-step exchange is too small
# to hide behind the attention core (Megatron-LM's CP guide recommends CP for sequences of 8K and more).
MIN_TOKENS_PER_CP_RANK = 2048
MIN_LAYERS_PER_STAGE = 2   # a stage of one layer is all embedding/output imbalance; no framework default
MAX_EP = 64                # DeepSeek-V3 trained with EP 64 (DeepSeek-AI 2024, section 3.2)
# FSDP (ZeRO-3) without pipelining is the usual way to train models up to ~70B (Llama 2 70B, torchtitan's
# Llama 3 70B recipes); larger models shard their layers with PP instead.
ZERO3_MAX_PARAMS = 80e9


@dataclass(frozen=True, kw_only=True)
class SearchBounds:
    """The values a dimension may take in the search (module doc); None: the module's choices."""

    tp: tuple[int, ...] | None = None
    """Tensor-parallel sizes allowed."""
    pp: tuple[int, ...] | None = None
    """Pipeline stages allowed."""
    ep: tuple[int, ...] | None = None
    """Expert-parallel sizes allowed (MoE models)."""
    zero: tuple[int, ...] | None = None
    """ZeRO stages to try instead of the module's (1, and 3 without PP for models up to ZERO3_MAX_PARAMS)."""

    def keep(self, name: str, values) -> list[int]:
        allowed = getattr(self, name)
        return [v for v in values if allowed is None or v in allowed]

    def describe(self) -> str:
        """`--tp 4 --pp 2-8`-like text of the bounds given, for messages; "" without any."""
        from fabriclab.units import format_int_list

        return " ".join(f"--{n} {format_int_list(list(getattr(self, n)))}" for n in ("tp", "pp", "ep", "zero")
                        if getattr(self, n) is not None)


@dataclass(frozen=True)
class Fitted:
    """The configurations that fit in memory, with their memory, and the smallest need of the others."""

    configs: list
    """(ParallelConfig, MemoryBreakdown) of those that fit, in enumeration order."""
    num_enumerated: int
    """Configurations the frameworks allow."""
    smallest: tuple | None
    """(bytes per GPU, ParallelConfig) of the configuration needing the least memory, fitting or not."""


def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, min(n, most) + 1) if n % d == 0]


def _shapes(spec: TransformerSpec, num_gpus: int, gpus_per_server: int, seq: int, bounds: SearchBounds):
    """(tp, cp, pp) the model, the sequence, the servers and the bounds allow."""
    for tp in bounds.keep("tp", TP_CHOICES):
        if tp > gpus_per_server or gpus_per_server % tp or spec.num_heads % tp or spec.num_kv_heads % tp:
            continue
        for cp in CP_CHOICES:
            if seq % (2 * cp if cp > 1 else 1) or seq // cp < min(seq, MIN_TOKENS_PER_CP_RANK):
                continue
            if num_gpus % (tp * cp):
                continue
            for pp in bounds.keep("pp", _divisors(num_gpus // (tp * cp), MAX_PP)):
                if pp == 1 or spec.num_layers >= MIN_LAYERS_PER_STAGE * pp:
                    yield tp, cp, pp


def _vps(spec: TransformerSpec, pp: int) -> list[int]:
    """Interleaving when the chunks are whole layers, or are with the embedding and the loss counted as a
    layer each (at least two a chunk, so the first and the last keep one)."""
    if pp == 1:
        return [1]
    layers = spec.num_layers
    return [1] + [v for v in VP_CHOICES if layers % (pp * v) == 0
                  or (layers + 2) % (pp * v) == 0 and (layers + 2) // (pp * v) >= 2]


def _folds(spec: TransformerSpec, tp: int, stage: int) -> list[tuple[int, int]]:
    """(etp, ep) of the experts' grid over a stage of `stage` = TP x CP x DP GPUs (module doc)."""
    if not spec.is_moe:
        return [(1, 1)]
    etps = sorted({1, tp} if spec.moe_intermediate_size % tp == 0 else {1})
    return [(t, e) for t in etps for e in _divisors(spec.num_experts, MAX_EP) if stage % (t * e) == 0]


def enumerate_configs(spec: TransformerSpec, num_gpus: int, gpus_per_server: int, *, gbs: int, seq: int,
                      precision: str = "bf16", bounds: SearchBounds = SearchBounds()) -> list[ParallelConfig]:
    """Every configuration of the module doc for `spec` on `num_gpus` GPUs (validated by ParallelConfig)."""
    out = []
    small = spec.num_params() <= ZERO3_MAX_PARAMS
    for tp, cp, pp in _shapes(spec, num_gpus, gpus_per_server, seq, bounds):
        dp = num_gpus // (tp * cp * pp)
        for mbs in MBS_CHOICES:
            if gbs % (mbs * dp):
                continue
            micro = gbs // (mbs * dp)
            for vp in _vps(spec, pp):
                if vp > 1 and micro % pp:
                    continue
                if micro * pp * vp > MAX_PIPELINE_PASSES:
                    continue  # a step that long is refused by every command (workload/parallel.py)
                for etp, ep in _folds(spec, tp, tp * cp * dp):
                    if bounds.ep is not None and ep not in bounds.ep:
                        continue
                    zeros = bounds.zero or ((1, 3) if pp == 1 and small and dp * cp > 1 else (1,))
                    for zero in zeros:
                        for recompute in RECOMPUTE_CHOICES:
                            out.append(ParallelConfig(
                                num_gpus=num_gpus, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, etp=etp, mbs=mbs, gbs=gbs,
                                seq=seq, sequence_parallel=tp > 1, zero=zero, recompute=recompute,
                                precision=precision))
    # the job's own check, as whatif llm and the trainer make it (the choices above already keep to it); and groups
    # the library model can cost server by server (on domains of 72, a DP group of 64 at 9 per domain is not)
    even: dict[tuple, bool] = {}

    def costable(par: ParallelConfig) -> bool:
        key = (par.tp, par.cp, par.pp, par.ep, par.etp)
        if key not in even:
            even[key] = par.uneven_group(gpus_per_server) is None
        return even[key]

    return [par for par in out if job_problem(spec, par) is None and costable(par)]


def divides(spec: TransformerSpec, num_gpus: int, gpus_per_server: int, *, gbs: int, seq: int,
            bounds: SearchBounds = SearchBounds(), precision: str = "bf16") -> bool:
    """Whether `enumerate_configs` finds any configuration for `num_gpus` GPUs and the global batch `gbs`, memory
    aside: a TP x CP x PP shape whose DP divides `gbs` (one sequence a micro-batch, no interleaving, which
    every shape may take), its groups costable on the servers; the cheap test `plan/llm/sizes.py` scans with."""
    for tp, cp, pp in _shapes(spec, num_gpus, gpus_per_server, seq, bounds):
        dp = num_gpus // (tp * cp * pp)
        if gbs % dp or gbs // dp * pp > MAX_PIPELINE_PASSES:
            continue
        for etp, ep in _folds(spec, tp, tp * cp * dp):
            if bounds.ep is not None and ep not in bounds.ep:
                continue
            par = ParallelConfig(num_gpus=num_gpus, tp=tp, pp=pp, vp=1, cp=cp, ep=ep, etp=etp, mbs=1, gbs=gbs,
                                 seq=seq, sequence_parallel=tp > 1, zero=(bounds.zero or (1,))[0], recompute="full",
                                 precision=precision)
            if job_problem(spec, par) is None and par.uneven_group(gpus_per_server) is None:
                return True
    return False


def memory_needs(spec: TransformerSpec, configs: list[ParallelConfig],
                 options: MemoryOptions = MemoryOptions()) -> list:
    """The memory of each configuration's most loaded GPU (`MemoryBreakdown`): the same on every cluster."""
    return [memory_per_gpu(spec, par, options=options) for par in configs]


def _fit(need, gpu_memory_bytes: float, reserve_bytes: float):
    """`need` with its `MemoryFit` on this GPU, or None when `check_fits` refuses it."""
    from dataclasses import replace

    try:
        return replace(need, fit=check_fits(need, gpu_memory_bytes, reserve_bytes=reserve_bytes))
    except ValueError:
        return None


def fit_configs(configs: list[ParallelConfig], needs: list, gpu_memory_bytes: float,
                reserve_bytes: float = MemoryOptions().reserve_bytes) -> Fitted:
    """The configurations whose most loaded GPU fits `gpu_memory_bytes` by `check_fits` (module doc), each
    with its fit (a warning when marginal); `needs` are their `memory_needs`."""
    checked = [(par, _fit(need, gpu_memory_bytes, reserve_bytes)) for par, need in zip(configs, needs)]
    fits = [(par, need) for par, need in checked if need is not None]
    sure = [(par, need) for par, need in fits if need.fit.warning is None]
    fits = sure or fits  # a marginal configuration only when nothing fits for sure
    smallest = min(zip(configs, needs), key=lambda pn: pn[1].total_bytes, default=None)
    return Fitted(configs=fits, num_enumerated=len(configs),
                  smallest=None if smallest is None else (smallest[1].total_bytes, smallest[0]))
