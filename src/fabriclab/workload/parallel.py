"""How a transformer's training is split over GPUs, as Megatron-LM / NeMo, FSDP and DeepSpeed express it.

GPUs = TP x CP x DP x PP (tensor, context, data and pipeline parallel). Placement follows the frameworks'
default order, innermost first: TP (inside a server, on NVLink), then CP, then DP, then PP outermost;
`order` changes it.

Mixture-of-experts layers fold their parallelism apart from attention's, as Megatron-Core runs them (Liu et
al. 2025, "MoE Parallel Folding: Heterogeneous Parallelism Mappings for Efficient Large-Scale MoE Model
Training with Megatron Core"): over the same GPUs of a pipeline stage, attention runs TP x CP x DP and the
routed experts ETP x EP x expert-DP (ETP: expert tensor parallel, each expert's matrices split; EP: the
experts split; EDP: the replicas of an expert), with ETP x EP x EDP = TP x CP x DP, so ETP x EP must divide
TP x CP x DP. Megatron-Core's rank generator places the experts' grid by the same order string with CP
dropped and EP just inside DP (its default `tp-cp-ep-dp-pp`: experts `etp-ep-edp-pp`, innermost first), so
with PP outermost a stage's ranks, in rank order, are cut into runs of ETP (an expert's shards), ETP x EP
(an expert-parallel group of those) and their copies; `expert_coordinates` holds it. Pipeline groups are the
same on both grids (Megatron-Core asserts it).

A rank's coordinates and every communicator's groups come from `ranks_of` / `groups`: pure integer
arithmetic, no torch, so the simulator and the real trainer share them.

Try it: `python -c "from fabriclab.workload.parallel import ParallelConfig as P;
p = P(num_gpus=128, tp=4, pp=8, vp=6, mbs=1, gbs=256, seq=2048); print(p.dp, p.num_microbatches, p.groups('dp')[0])"`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ZERO_STAGES = (0, 1, 2, 3)
RECOMPUTE = ("none", "selective", "full")
# Megatron-Core's `--recompute-modules` (megatron/core/transformer/transformer_config.py) that this model
# knows: what each keeps and runs again is in `workload/memory.py` and `whatif/llm/program.py`.
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
PRECISIONS = ("bf16", "fp8")
DIMENSIONS = ("tp", "cp", "dp", "pp")
DEFAULT_ORDER = "tp-cp-dp-pp"
COMMUNICATORS = ("tp", "cp", "ep", "dp", "pp", "etp", "edp", "etpep")
EXPERT_COMMUNICATORS = ("ep", "etp", "edp", "etpep")  # on the experts' grid (module doc)
# The counts a job may have here, for every command that takes one (whatif llm, calibrate step, bench
# astra-sim, plan --model, train): beyond them the step does not finish, or exhausts the memory, on a
# workstation. Measured with `whatif llm` on a 2-core machine:
# - GPUs: 2^20 (1,048,576, the million-GPU clusters plans now reach); the placement arrays and the
#   communicator groups grow with the GPUs: at 2^20 the worst split (llama3-8b, DP 2^20, ZeRO-3) took 41 s
#   and 2.2 GB, TP 8 x PP 16 took 33 s and 1.2 GB. `--gpus 999999999999999992` asked for 7 EiB.
MAX_GPUS = 1 << 20
# - micro-batch passes per step, num_microbatches x pp x vp: the pipeline schedule is simulated per
#   micro-batch, per stage and per model chunk. 2^18 (262,144) took 4 s and 300 MB (llama3-8b, PP 8, VP 4,
#   8,192 micro-batches); 2^20 took 18 s and 1 GB; `--gbs 8000000000` (250M micro-batches) took 7.7 GB.
MAX_PIPELINE_PASSES = 1 << 18


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """One parallel configuration of a training job (validated on construction: a ValueError says what to
    change)."""

    num_gpus: int
    """GPUs of the job = tp x cp x dp x pp."""
    tp: int = 1
    """Tensor-parallel ranks (Megatron column/row-parallel linear layers, heads split)."""
    pp: int = 1
    """Pipeline stages."""
    vp: int = 1
    """Virtual stages (model chunks) per pipeline rank: interleaved 1F1B when > 1."""
    cp: int = 1
    """Context-parallel ranks (the sequence split, ring exchange of keys and values)."""
    ep: int = 1
    """Expert-parallel ranks: the routed experts of an MoE layer split over EP GPUs; with `etp` folded over
    the GPUs of a pipeline stage (module doc), so etp x ep must divide tp x cp x dp."""
    etp: int = 1
    """Expert tensor-parallel ranks: each routed expert's matrices split over ETP GPUs (Megatron-Core's
    `--expert-tensor-parallel-size`). 1, as Megatron-Bridge's MoE recipes set it and the folding paper
    advises; Megatron-LM itself takes --tp when it is not given, so give `etp=tp` to reproduce such a run."""
    mbs: int = 1
    """Micro-batch size (sequences per micro-batch per pipeline)."""
    gbs: int
    """Global batch size (sequences per optimizer step); a multiple of mbs x dp."""
    seq: int
    """Sequence length in tokens."""
    sequence_parallel: bool = True
    """Megatron sequence parallelism: TP all-gather / reduce-scatter instead of all-reduce, norms and
    dropout split along the sequence (same bytes on the wire, less activation memory)."""
    zero: int = 1
    """Sharded data parallelism: 0 plain DP (all-reduce of gradients), 1 optimizer states sharded
    (Megatron's distributed optimizer: reduce-scatter gradients, all-gather parameters), 2 gradients too,
    3 parameters too (FSDP: all-gather parameters for forward and backward of every layer)."""
    recompute: str = "none"
    """Activation recomputation: none, selective (the `recompute_modules` recomputed), full (each layer's
    forward run again in backward, only its input kept)."""
    recompute_modules: tuple[str, ...] = ()
    """With selective recomputation, Megatron-Core's modules run again in backward (RECOMPUTE_MODULES);
    empty: its default, `core_attn` (the attention core)."""
    offload_layers: int = 0
    """Activation offloading (Megatron-Core's `--cpu-offloading-num-layers`): the activations of the first
    N transformer layers of each model chunk go to host memory after their forward and come back before
    their backward (to Grace over NVLink-C2C on GB200 / GB300, over PCIe elsewhere)."""
    precision: str = "bf16"
    """Math precision of the matrix multiplications: bf16 or fp8 (weights and gradients kept in bf16)."""
    flash_attention: bool = True
    """Fused attention (FlashAttention / Transformer Engine, the default of Megatron-Core, NeMo and
    torchtitan): the s x s attention scores are never stored, so no recomputation already keeps only what
    selective recomputation keeps of the attention core. False: the scores are stored (Korthikanti et al.'s
    5 a s / h term)."""
    order: str = DEFAULT_ORDER
    """Placement of the dimensions, innermost (fastest varying rank) first, e.g. `tp-cp-dp-pp`."""

    def __post_init__(self) -> None:
        for name in ("num_gpus", "tp", "pp", "vp", "cp", "ep", "etp", "mbs", "gbs", "seq"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"--{name.replace('num_', '')} {value!r}: give a whole number >= 1")
        if self.num_gpus > MAX_GPUS:
            raise ValueError(f"--gpus {self.num_gpus}: a job here has at most {MAX_GPUS:,} GPUs (2^20: its "
                             f"placement and groups take about 40 s and 2 GB there); give fewer")
        if self.num_gpus % (self.tp * self.cp * self.pp):
            raise ValueError(f"{self.num_gpus} GPUs are not a multiple of tp x cp x pp = "
                             f"{self.tp} x {self.cp} x {self.pp}: change --gpus, --tp, --cp or --pp")
        if self.gbs % (self.mbs * self.dp):
            raise ValueError(f"--gbs {self.gbs} is not a multiple of mbs x dp = {self.mbs} x {self.dp} = "
                             f"{self.mbs * self.dp}: give e.g. --gbs {self.mbs * self.dp * max(1, self.gbs // (self.mbs * self.dp))}")
        self._check_passes()
        if self.vp > 1 and self.pp == 1:
            raise ValueError(f"--vp {self.vp} needs pipeline parallelism (--pp > 1)")
        if self.vp > 1 and self.num_microbatches % self.pp:
            raise ValueError(f"interleaved 1F1B (--vp {self.vp}) needs micro-batches per pipeline "
                             f"({self.num_microbatches}) to be a multiple of --pp {self.pp}")
        if self.seq % self.cp:
            raise ValueError(f"--seq {self.seq} is not a multiple of --cp {self.cp}")
        if self.zero not in ZERO_STAGES:
            raise ValueError(f"--zero {self.zero!r}: use 0, 1, 2 or 3")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"--recompute {self.recompute!r}: use {', '.join(RECOMPUTE)}")
        self._check_memory_options()
        if self.precision not in PRECISIONS:
            raise ValueError(f"--precision {self.precision!r}: use {', '.join(PRECISIONS)}")
        dims = self.order.split("-")
        if sorted(dims) != sorted(DIMENSIONS):
            raise ValueError(f"--order {self.order!r}: name each of {', '.join(DIMENSIONS)} once, innermost "
                             f"first, e.g. {DEFAULT_ORDER}")
        self._check_experts()

    def _check_experts(self) -> None:
        """The experts' grid folds over a stage's GPUs: etp x ep divides tp x cp x dp (module doc)."""
        stage = self.tp * self.cp * self.dp
        fold = self.etp * self.ep
        if stage % fold:
            fits = [e for e in range(1, stage + 1) if stage % (self.etp * e) == 0]
            raise ValueError(f"--etp {self.etp} x --ep {self.ep} = {fold} must divide tp x cp x dp = {self.tp} x "
                             f"{self.cp} x {self.dp} = {stage} (the experts' ETP x EP x expert-DP fold over the same "
                             f"GPUs of a pipeline stage as attention's TP x CP x DP): use --ep "
                             f"{', '.join(map(str, fits[-4:])) or '1'} with --etp {self.etp}, or change --gpus, --tp, "
                             f"--cp or --pp")
        if fold > 1 and self.pp > 1:
            dims = self.order.split("-")
            if not self._pp_stride(dims, self.sizes()) == self._pp_stride(*self._expert_order()):
                raise ValueError(f"--order {self.order} with --etp {self.etp} --ep {self.ep}: the experts' grid "
                                 f"would run other pipeline groups than attention's (Megatron-Core requires the "
                                 f"same); put pp last, e.g. {DEFAULT_ORDER}")

    def _check_memory_options(self) -> None:
        unknown = [m for m in self.recompute_modules if m not in RECOMPUTE_MODULES]
        if unknown:
            raise ValueError(f"--recompute-modules {','.join(unknown)}: use Megatron-Core's "
                             f"{', '.join(RECOMPUTE_MODULES)}")
        if self.recompute_modules and self.recompute != "selective":
            raise ValueError(f"--recompute-modules {','.join(self.recompute_modules)} picks what selective "
                             f"recomputation runs again: add --recompute selective (--recompute {self.recompute} "
                             f"{'recomputes every module' if self.recompute == 'full' else 'recomputes nothing'})")
        if isinstance(self.offload_layers, bool) or not isinstance(self.offload_layers, (int, np.integer)) \
                or self.offload_layers < 0:
            raise ValueError(f"--offload-activations {self.offload_layers!r}: give a whole number of layers "
                             f">= 0 per model chunk, or a share such as 0.25")

    @staticmethod
    def _pp_stride(dims: list[str], sizes: dict[str, int]) -> int:
        stride = 1
        for d in dims[:dims.index("pp")]:
            stride *= sizes[d]
        return stride

    def _expert_order(self) -> tuple[list[str], dict[str, int]]:
        """The experts' grid in Megatron-Core's order: the job's order with CP dropped, EP just inside DP,
        TP and DP as ETP and expert-DP (`tp-cp-dp-pp` -> `etp-ep-edp-pp`), and its sizes."""
        names = {"tp": ["etp"], "cp": [], "dp": ["ep", "edp"], "pp": ["pp"]}
        dims = [e for d in self.order.split("-") for e in names[d]]
        return dims, {"etp": self.etp, "ep": self.ep, "edp": self.edp, "pp": self.pp}

    def _check_passes(self) -> None:
        """The micro-batch passes of one step within MAX_PIPELINE_PASSES (see there)."""
        passes = self.num_microbatches * self.pp * self.vp
        if passes <= MAX_PIPELINE_PASSES:
            return
        most = max(1, MAX_PIPELINE_PASSES // (self.pp * self.vp)) * self.mbs * self.dp
        raise ValueError(f"--gbs {self.gbs} is {self.num_microbatches:,} micro-batches per pipeline (gbs / (mbs x "
                         f"dp) = {self.gbs} / ({self.mbs} x {self.dp})), {passes:,} passes with pp x vp = "
                         f"{self.pp} x {self.vp}: a step here takes at most {MAX_PIPELINE_PASSES:,} (its simulated "
                         f"schedule: about 4 s); "
                         f"give --gbs <= {most:,}, or a larger --mbs")

    @property
    def dp(self) -> int:
        """Data-parallel replicas: GPUs / (tp x cp x pp)."""
        return self.num_gpus // (self.tp * self.cp * self.pp)

    @property
    def edp(self) -> int:
        """Expert data-parallel replicas: the copies of an expert, tp x cp x dp / (etp x ep)."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    @property
    def num_microbatches(self) -> int:
        """Micro-batches each pipeline runs per step (gradient accumulation): gbs / (mbs x dp)."""
        return self.gbs // (self.mbs * self.dp)

    @property
    def tokens_per_step(self) -> int:
        return self.gbs * self.seq

    def sizes(self) -> dict[str, int]:
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}

    def coordinates(self) -> dict[str, np.ndarray]:
        """Each dimension's index of every rank (arrays of num_gpus), by the placement order."""
        sizes = self.sizes()
        ranks = np.arange(self.num_gpus)
        out, stride = {}, 1
        for dim in self.order.split("-"):
            out[dim] = ranks // stride % sizes[dim]
            stride *= sizes[dim]
        return out

    def expert_coordinates(self) -> dict[str, np.ndarray]:
        """Each rank's place on the experts' grid (`etp`, `ep`, `edp`, `pp`), in Megatron-Core's order
        (module doc)."""
        dims, sizes = self._expert_order()
        ranks = np.arange(self.num_gpus)
        out, stride = {}, 1
        for dim in dims:
            out[dim] = ranks // stride % sizes[dim]
            stride *= sizes[dim]
        return out

    def groups(self, communicator: str) -> list[list[int]]:
        """The rank groups of a communicator, each in its ring order: attention's `tp`, `cp`, `dp`, `pp` and
        the experts' `ep`, `etp`, `edp` (the ranks holding the same expert shard) and `etpep` (ETP x EP, the
        all-gather dispatcher's group), on the experts' grid (module doc). `dp` is the gradient communicator
        of the dense parameters (dp ranks of one cp index)."""
        if communicator not in COMMUNICATORS:
            raise ValueError(f"communicator {communicator!r}: one of {', '.join(COMMUNICATORS)}")
        keys, within, size = self._group_keys(communicator)
        ranks = np.arange(self.num_gpus)
        order = np.lexsort((ranks, within, *reversed(keys)))  # by group key, then position in the group
        return ranks[order].reshape(-1, size).tolist()

    def _group_keys(self, communicator: str) -> tuple[list[np.ndarray], np.ndarray, int]:
        """(keys that name a rank's group, its position inside the group, the group size), per rank."""
        if communicator in EXPERT_COMMUNICATORS:
            e = self.expert_coordinates()
            if communicator == "etpep":
                return [e["edp"], e["pp"]], e["etp"] + self.etp * e["ep"], self.etp * self.ep
            others = [d for d in ("etp", "ep", "edp") if d != communicator]
            return [e[d] for d in others] + [e["pp"]], e[communicator], self.group_size(communicator)
        coords = self.coordinates()
        others = [d for d in DIMENSIONS if d != communicator]
        return [coords[d] for d in others], coords[communicator], self.group_size(communicator)

    def uneven_group(self, gpus_per_server: int) -> tuple[str, list[int], int, int] | None:
        """A communicator whose groups the library model cannot cost on servers of `gpus_per_server` GPUs:
        (name, the group of rank 0, servers it spans, most of its GPUs in one server), or None. A group is
        costed as servers of its most GPUs in one server (`whatif/llm/comm.group_cluster`), so its size must
        be a multiple of that when it spans servers: `--gpus 24 --tp 3` on servers of 8 puts a DP group of 8
        at 3, 3 and 2 GPUs per server."""
        coords = self.coordinates()
        dpcp = np.flatnonzero((coords["tp"] == 0) & (coords["pp"] == 0))  # Megatron's dense gradient group
        # rank 0's group of each communicator: the ranks whose group keys are rank 0's, all 0 (no sort needed)
        first = [(c, np.flatnonzero(np.logical_and.reduce([k == 0 for k in self._group_keys(c)[0]])))
                 for c in self._costed()]
        candidates = [*first, ("dp x cp", dpcp)]
        for name, group in candidates:
            _, counts = np.unique(group // gpus_per_server, return_counts=True)
            most = int(counts.max())
            if counts.size > 1 and group.size % most:
                return name, group.tolist(), int(counts.size), most
        if gpus_per_server & (gpus_per_server - 1):  # servers (NVLink domains) of 72: groups may differ by offset
            return self._unlike_groups(gpus_per_server)
        return None

    def _unlike_groups(self, gpus_per_server: int) -> tuple[str, list[int], int, int] | None:
        """A communicator one of whose groups sits otherwise than rank 0's (a TP x PP layout whose DP groups of
        64 fall 64 in one domain of 72 and 8 + 56 across the next): (name, that group, its servers, most)."""
        servers = np.arange(self.num_gpus) // gpus_per_server
        for name in self._costed():
            keys, _, size = self._group_keys(name)
            if size == 1:
                continue
            _, gid = np.unique(np.stack(keys), axis=1, return_inverse=True)
            pairs, counts = np.unique(gid.ravel() * (servers[-1] + 1) + servers, return_counts=True)
            group_of = pairs // (servers[-1] + 1)
            spans = np.bincount(group_of)
            most = np.maximum.reduceat(counts, np.flatnonzero(np.r_[True, group_of[1:] != group_of[:-1]]))
            bad = np.flatnonzero((spans != spans[0]) | (most != most[0]))
            if bad.size:
                ranks = np.flatnonzero(gid.ravel() == bad[0])
                return name, ranks.tolist(), int(spans[bad[0]]), int(most[bad[0]])
        return None

    def _costed(self) -> tuple[str, ...]:
        """The communicators whose groups the step runs: the experts' only when they are split."""
        return COMMUNICATORS if self.ep * self.etp > 1 else tuple(c for c in COMMUNICATORS if c in DIMENSIONS)

    def group_size(self, communicator: str) -> int:
        return {"tp": self.tp, "cp": self.cp, "ep": self.ep, "dp": self.dp, "pp": self.pp, "etp": self.etp,
                "edp": self.edp, "etpep": self.etp * self.ep}[communicator]

    def describe(self) -> str:
        extra = f" VP{self.vp}" if self.vp > 1 else ""
        ep = (f" EP{self.ep}" if self.ep > 1 else "") + (f" ETP{self.etp}" if self.ep * self.etp > 1 else "")
        recompute = self.recompute + (f" {','.join(self.recompute_modules)}" if self.recompute_modules else "")
        offload = f", offload {self.offload_layers} layers" if self.offload_layers else ""
        return (f"TP{self.tp} PP{self.pp}{extra} CP{self.cp}{ep} DP{self.dp} (mbs {self.mbs}, gbs {self.gbs}, "
                f"seq {self.seq}, ZeRO-{self.zero}, recompute {recompute}{offload}, {self.precision})")


def layers_of_chunks(num_layers: int, num_chunks: int) -> list[int]:
    """Layers per model chunk, in order: as even as possible, the first chunks one more when they do not
    divide (Megatron requires divisibility unless told otherwise; an uneven split is costed as it falls).
    Where the layers do not divide but the layers plus the embedding and the loss do, those two count as a
    layer each (Megatron-LM's `--account-for-embedding-in-pipeline-split` and `...-loss-...`): the first
    and the last chunk hold one layer fewer, as Llama 3 405B's 126 layers run on 16 stages (7, 8 x 14, 7;
    Meta's "The Llama 3 Herd of Models", section 3.3.2)."""
    if num_chunks > num_layers:
        raise ValueError(f"{num_layers} layers cannot fill {num_chunks} model chunks (pp x vp): use fewer "
                         f"pipeline stages or virtual stages")
    if num_chunks > 2 and num_layers % num_chunks and (num_layers + 2) % num_chunks == 0:
        per = (num_layers + 2) // num_chunks
        return [per - 1] + [per] * (num_chunks - 2) + [per - 1]
    base, extra = divmod(num_layers, num_chunks)
    return [base + (1 if i < extra else 0) for i in range(num_chunks)]
