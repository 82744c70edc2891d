"""The LLM training step written once: per pipeline stage, model chunk and layer, the ordered operations
of one rank, with no times. Everything else reads it: the step simulator costs it (`whatif/llm/step.py`),
the link loads route it (`whatif/llm/links.py`), the Chakra export and the trace write it
(`whatif/llm/export.py`, `whatif/llm/trace.py`). No other module holds a byte formula of the step.

A rank's role is its pipeline stage: every rank of a stage runs the same program (TP, CP, EP and DP
ranks differ only in their peers). Per (stage, chunk) the program holds a forward and a backward pass of
one micro-batch as a list of `LayerPass`es in the order the pass runs them, each with:

* `ops`: compute (`Work`: linear-layer and attention-core FLOPs, bytes moved) and the communication the
  compute stream waits for (`Call`), in order. Per layer, as Megatron-LM runs it:
  - TP with sequence parallelism: an all-gather before and a reduce-scatter after the attention block and
    the MLP (without it two all-reduces); backward the same. `overlap="linear"`: TP overlap (Transformer
    Engine's userbuffers) hides them behind the layer's linear layers.
  - CP: the ring exchange of keys and values, cp - 1 steps (backward: their gradients too, twice the
    bytes), `overlap="attention"`: hidden behind the attention core where it can.
  - EP: per MoE layer the dispatch and the combine of the tokens a rank routes (its share of the sequence),
    forward and backward, by the dispatcher (DISPATCHERS, `moe_dispatcher`): `alltoall` the top-k copies
    over EP, with ETP > 1 gathered over ETP before the experts and reduce-scattered after; `allgather`
    every token to the ETP x EP group and reduce-scattered back; `deepep` an RDMA step between the
    NVLink domains the ETP x EP group spans (`ep_inter`: one copy of a token per domain its experts reach)
    and an NVLink step inside one (`ep_intra`). Exposed unless `ep_overlap` (`overlap="compute"`: behind the
    layer's compute, as DeepSeek's DualPipe overlaps one micro-batch's all-to-all with another's compute).
    Without shared experts an MoE layer under sequence parallelism has no TP collectives (Megatron-Core).
  - Recompute: `full` runs the layer's forward again (compute, TP, CP and the EP all-to-alls: 6 per MoE
    layer and micro-batch, not 4) before its backward; `selective` the layer's recompute modules
    (`ParallelConfig.recompute_modules`, default the attention core; `moe` runs the dispatch and combine
    again too).
  - Offload (`ParallelConfig.offload_layers`): the first layers of each chunk copy their activations to
    host memory after their forward and back before their backward (`host`, behind the layer's compute).
* `gather` / `reduce` (ZeRO-3, FSDP): the unit's parameters all-gathered before its ops (prefetched one
  unit ahead on the DP stream) and its gradients reduce-scattered after its backward, a unit being
  `fsdp_unit` layers (the embedding and the output layer are units of their own, as torchtitan wraps
  them). With `shard_group` N (HSDP, torchtitan's and Megatron-FSDP's hybrid sharding) the gathers and
  reduce-scatters run in groups of N ranks, and the shards' gradients are all-reduced across the
  replicas once per step, behind the last backward.

Per chunk, ZeRO 0-2 hold `buckets`: the gradient reduction (all-reduce for ZeRO-0, reduce-scatter for 1
and 2) and the parameter all-gather (1 and 2) in Megatron-Core's buckets, in backward order: a bucket is
max(40M, 1M x dp x cp) parameters (`DistributedDataParallelConfig.bucket_size`'s default; `bucket_params`
sets another, 0 one per chunk as fabriclab's own trainer reduces its flat buffers), dense and expert
parameters in buckets of their own. Per stage `sends`: the activations and gradients it sends to
other stages (1F1B or interleaved), and the optimizer's shard.

Sizes follow nccl-tests' buffer convention (all-reduce: the buffer; all-gather: the gathered output;
reduce-scatter: the input; all-to-all: the send buffer; sendrecv: one message). Communicators: `tp`,
`cp`, `ep`, `etp`, `etpep`, `ep_inter`, `ep_intra`, `pp`, `dpcp` (the dense gradients' group: dp x cp),
`edp` (the experts': tp x cp x dp / (etp x ep)), `shard` and `replica` (HSDP's two groups of the dense
parameters), `host` (an offload's copy over the GPU's link to host memory).

Try it: `python -c "from fabriclab.whatif.llm.program import build_program; from fabriclab.workload.transformer
import load_model; from fabriclab.workload.parallel import ParallelConfig as P;
p = build_program(load_model('llama3-8b'), P(num_gpus=16, tp=2, pp=2, gbs=32, seq=2048));
print(len(p.chunks[(0, 0)].forward), p.chunks[(0, 0)].forward[1].ops)"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from fabriclab.whatif.llm.compute import layer_flops, layers_of_chunks
from fabriclab.whatif.llm.schedule import B, F, order
from fabriclab.whatif.llm.shapes import backward_kernels, layer_kernels, recompute_kernels
from fabriclab.workload.memory import layer_activation_bytes
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

ACT_BYTES = 2  # bf16 activations and gradients on the wire
PARAM_BYTES = 2  # bf16 parameters gathered (the gradients' bytes: `ProgramOptions.grad_bytes`)
# Megatron-Core's default DDP bucket: max(40M, 1M x data-parallel size) parameters
# (megatron/core/distributed/distributed_data_parallel.py).
BUCKET_MIN_PARAMS = 40_000_000
BUCKET_PARAMS_PER_RANK = 1_000_000
EMBEDDING, OUTPUT = -1, -2  # layer indices of the embedding and the output layer (with the loss)
# Megatron-Core's token dispatchers (`--moe-token-dispatcher-type`): alltoall, allgather, and flex with
# DeepEP's normal (training) kernels; DeepEP's low-latency kernels serve inference decoding, not training.
DISPATCHERS = ("alltoall", "allgather", "deepep")


@dataclass(frozen=True, kw_only=True)
class ProgramOptions:
    """How the framework runs the step (Megatron-LM's and torchtitan's switches)."""

    fsdp_unit: int = 1
    """ZeRO-3: transformer layers per FSDP unit (gathered and reduced together); 0: the whole model chunk,
    embedding and output layer included, as fabriclab's own trainer gathers it."""
    shard_group: int = 0
    """ZeRO-3: ranks that shard a parameter (HSDP); 0: all of dp x cp (plain FSDP)."""
    ep_overlap: bool = False
    """EP all-to-alls hidden behind the layer's compute (DualPipe-style), else exposed."""
    bucket_params: int | None = None
    """ZeRO 0-2: parameters per gradient bucket; None: Megatron-Core's default (module doc); 0: one bucket
    per model chunk, as fabriclab's own trainer reduces its flat buffers."""
    tp_overlap: bool = False
    """TP overlap: the GEMMs beside TP's collectives run in chunks (`whatif/llm/shapes.tp_chunks`)."""
    moe_dispatcher: str = "alltoall"
    """How an MoE layer's tokens reach their experts and come back (DISPATCHERS, module doc)."""
    ep_domains: int = 1
    """NVLink domains an ETP x EP group spans: DeepEP's RDMA step runs between them, one copy of a token
    per domain (the step model sets it from the cluster, `whatif/llm/comm.CommModel`)."""
    moe_imbalance: float = 1.0
    """The busiest expert rank's routed tokens over the mean (`whatif/llm/shapes.layer_kernels`)."""
    grad_bytes: int = 4
    """Bytes per gradient element the DP reductions move (4: fp32, Megatron-LM's default with bf16; 2: bf16)."""


@dataclass(frozen=True)
class Work:
    """Compute of one rank: forward or backward math of part of a layer."""

    name: str
    linear_flops: float
    attention_flops: float
    memory_bytes: float
    """Bytes read and written in device memory: weights once, activations in and out (a lower bound, for a
    roofline)."""
    kernels: tuple = ()
    """The kernels it runs, by shape (`whatif/llm/shapes.py`), for the kernel model to time."""

    @property
    def flops(self) -> float:
        return self.linear_flops + self.attention_flops


@dataclass(frozen=True)
class Call:
    """One collective (or one pipeline message) of one rank."""

    name: str
    communicator: str
    collective: str
    size_bytes: float
    overlap: str = ""
    """"" exposed; `linear` / `attention` / `compute`: may hide behind the layer's linear math, attention
    core or all its compute (when the option that allows it is on)."""


@dataclass(frozen=True)
class LayerPass:
    """One layer (or the embedding / output layer) in one pass of one micro-batch."""

    layer: int
    ops: tuple
    """Work and Call, in the order the compute stream runs them."""
    gather: tuple[Call, ...] = ()
    """ZeRO-3: the unit's parameters, gathered before `ops` (on the DP stream)."""
    reduce: tuple[Call, ...] = ()
    """ZeRO-3 backward: the unit's gradients, reduced after `ops` (on the DP stream)."""


@dataclass(frozen=True)
class Bucket:
    """ZeRO 0-2: one gradient bucket of a chunk, with the layers it covers."""

    layers: tuple[int, ...]
    reduce: tuple[Call, ...]
    gather: tuple[Call, ...]


@dataclass(frozen=True)
class ChunkProgram:
    stage: int
    chunk: int
    layers: tuple[int, ...]
    forward: tuple[LayerPass, ...]
    backward: tuple[LayerPass, ...]
    buckets: tuple[Bucket, ...]
    """ZeRO 0-2, in backward order."""
    dense_params: float
    expert_params: float
    """Parameters one rank holds of the chunk before ZeRO sharding."""

    def passes(self, kind: int) -> tuple[LayerPass, ...]:
        return self.forward if kind == F else self.backward


@dataclass(frozen=True)
class Send:
    """A pipeline message: `count` per step from this stage to `peer_stage`."""

    call: Call
    peer_stage: int
    count: int


@dataclass(frozen=True)
class StepProgram:
    spec: TransformerSpec
    par: ParallelConfig
    options: ProgramOptions
    chunks: dict
    """(stage, chunk) -> ChunkProgram."""
    sends: dict
    """stage -> list of Send."""
    step_calls: dict
    """stage -> Calls once per step after the last backward (HSDP's replica all-reduce)."""
    optimizer_params: list
    """Per stage: parameters in the shard one rank's optimizer updates."""

    def chunk(self, stage: int, chunk: int) -> ChunkProgram:
        return self.chunks[(stage, chunk)]


def stage_calls(program: StepProgram, stage: int):
    """(Call, calls per step) of every collective and message of one stage's program."""
    par = program.par
    for v in range(par.vp):
        chunk = program.chunk(stage, v)
        for kind in (F, B):
            for lp in chunk.passes(kind):
                for op in (*lp.ops, *lp.gather, *lp.reduce):
                    if not isinstance(op, Work):
                        yield op, par.num_microbatches
        for bucket in chunk.buckets:
            for call in (*bucket.reduce, *bucket.gather):
                yield call, 1
    for send in program.sends.get(stage, ()):
        yield send.call, send.count
    for call in program.step_calls.get(stage, ()):
        yield call, 1


class _Layers:
    """Per-layer pieces of one rank's program (FLOPs, bytes, calls), built once per job."""

    def __init__(self, spec: TransformerSpec, par: ParallelConfig, options: ProgramOptions) -> None:
        self.spec, self.par, self.options = spec, par, options
        self.tokens = par.mbs * par.seq / par.cp  # tokens a rank holds in a micro-batch
        h, tp = spec.hidden_size, par.tp
        self.act = self.tokens * h * ACT_BYTES  # one layer's activation (TP's gathered buffer)
        f = layer_flops(spec, par)
        self.attn_linear, self.attn_core, self.dense_mlp, self.moe_mlp, self.logits = (
            f.attention_linear, f.attention_core, f.dense_mlp, f.moe_mlp, f.logits)
        self.kv = 2 * self.tokens * spec.num_kv_heads * spec.head_dim * ACT_BYTES / tp
        self.dispatch = self.tokens * max(1, spec.experts_per_token) * h * ACT_BYTES / tp
        self.shard = options.shard_group if options.shard_group and options.shard_group < par.dp * par.cp else 0
        self.kernels = layer_kernels(spec, par, options.tp_overlap, options.moe_imbalance)
        self.again = recompute_kernels(spec, par, self.kernels)  # what selective recomputation runs again
        self._ops: dict[tuple, tuple] = {}
        self._units: dict[tuple, tuple] = {}
        self._params: dict = {}

    def ops(self, layer: int, kind: int, offload: bool = False) -> tuple:
        """`forward_ops` or `backward_ops` of `layer`, built once per kind of layer (dense, MoE, embedding,
        output) and whether its activations go to host memory: the layers of one kind run the same ops."""
        key = (layer if layer < 0 else self.spec.is_moe_layer(layer), kind, offload)
        if key not in self._ops:
            ops = self.forward_ops(layer) if kind == F else self.backward_ops(layer)
            if offload:  # after the forward its activations go to the host, before the backward they come back
                size = layer_activation_bytes(self.spec, self.par, self.spec.is_moe_layer(layer))
                copy = Call(f"host.{'offload' if kind == F else 'reload'}", "host", "memcpy", size, "compute")
                ops = [*ops, copy] if kind == F else [copy, *ops]
            self._ops[key] = tuple(ops)
        return self._ops[key]

    def params(self, layer: int) -> tuple[float, float]:
        """(dense, expert) parameters one rank holds of `layer` (before ZeRO), per kind of layer."""
        key = layer if layer < 0 else self.spec.is_moe_layer(layer)
        if key not in self._params:
            self._params[key] = self._layer_params(layer)
        return self._params[key]

    def _layer_params(self, layer: int) -> tuple[float, float]:
        spec, par = self.spec, self.par
        if layer == EMBEDDING:
            return spec.embedding_params() / par.tp, 0.0
        if layer == OUTPUT:
            return spec.output_params() / par.tp, 0.0
        dense, experts = spec.layer_params(layer)
        return dense / par.tp, experts / (par.ep * par.etp)

    def _tp(self, tag: str) -> tuple[list[Call], list[Call]]:
        """TP's calls (before, after) one block: sequence parallel gathers before and reduce-scatters
        after; without it one all-reduce after."""
        if self.par.tp == 1:
            return [], []
        if self.par.sequence_parallel:
            return ([Call(f"tp.allgather.{tag}", "tp", "allgather", self.act, "linear")],
                    [Call(f"tp.reduce_scatter.{tag}", "tp", "reduce_scatter", self.act, "linear")])
        return [], [Call(f"tp.allreduce.{tag}", "tp", "allreduce", self.act, "linear")]

    def _cp(self, scale: int) -> list[Call]:
        return [Call("cp.sendrecv.kv", "cp", "sendrecv", self.kv * scale, "attention")] * (self.par.cp - 1)

    def _ep(self, name: str) -> list[Call]:
        """The MoE layer's `dispatch` (before the experts) or `combine` (after) by the dispatcher (module doc)."""
        par, how = self.par, self.options.moe_dispatcher
        if par.ep * par.etp == 1:
            return []
        overlap = "compute" if self.options.ep_overlap else ""
        token = self.dispatch / max(1, self.spec.experts_per_token)  # one copy of a rank's tokens
        if how == "allgather":  # every token to every rank of the ETP x EP group, and back reduce-scattered
            collective = "allgather" if name == "dispatch" else "reduce_scatter"
            return [Call(f"ep.{collective}.{name}", "etpep", collective, token * par.etp * par.ep, overlap)]
        if how == "deepep":
            n = max(1, self.options.ep_domains)  # a token crosses to each domain holding one of its experts once
            calls = [Call(f"ep.deepep.rdma.{name}", "ep_inter", "alltoall", n * token * _reached(self.spec, n),
                          overlap),
                     Call(f"ep.deepep.nvlink.{name}", "ep_intra", "alltoall", self.dispatch * par.etp, overlap)]
            return calls if name == "dispatch" else calls[::-1]
        calls = [Call(f"ep.alltoall.{name}", "ep", "alltoall", self.dispatch, overlap)] if par.ep > 1 else []
        if par.etp > 1:  # the tokens an expert's shards received, gathered over ETP (and reduce-scattered back)
            collective = "allgather" if name == "dispatch" else "reduce_scatter"
            calls.append(Call(f"ep.etp.{collective}.{name}", "etp", collective, self.dispatch * par.etp, overlap))
        return calls if name == "dispatch" else calls[::-1]

    def forward_ops(self, layer: int) -> list:
        """The ops of one layer's forward: attention block, then MLP or experts."""
        if layer == EMBEDDING:
            return [Work("embedding", 0.0, 0.0, self.act, self.kernels["embedding"])]
        if layer == OUTPUT:
            return [Work("output", self.logits, 0.0, self.params(layer)[0] * PARAM_BYTES + self.act,
                         self.kernels["output"])]
        dense, experts = self.params(layer)
        moe = self.spec.is_moe_layer(layer)
        attn_params = self.spec.attention_params() / self.par.tp
        before, after = self._tp("attention")
        ops: list = [*before, Work("attention", self.attn_linear, self.attn_core, attn_params * PARAM_BYTES
                                   + 2 * self.act, self.kernels["attention"]), *self._cp(1), *after]
        mlp = Work("experts" if moe else "mlp", self.moe_mlp if moe else self.dense_mlp, 0.0,
                   (dense - attn_params + experts) * PARAM_BYTES + 2 * self.act,
                   self.kernels["experts" if moe else "mlp"])
        before, after = self._tp("mlp")
        if not moe:
            return ops + [*before, mlp, *after]
        if self.par.sequence_parallel and not self.spec.num_shared_experts:
            before, after = [], []  # the router and the dispatcher take a rank's share of the sequence as it is;
                                    # only shared experts gather it over TP (Megatron-Core)
        return ops + [*before, *self._ep("dispatch"), mlp, *self._ep("combine"), *after]

    def backward_ops(self, layer: int) -> list:
        """Recompute (what the framework runs again), then the backward: twice the math, the same
        communication (CP: the gradients of keys and values too)."""
        recompute = self.par.recompute
        ops: list = []
        if layer >= 0 and recompute == "full":
            ops += [_renamed(op, "recompute.") for op in self.forward_ops(layer)]
        elif layer >= 0 and recompute == "selective":
            ops += self._recomputed(layer)
        for op in reversed(self.forward_ops(layer)):
            if isinstance(op, Work):
                ops.append(Work(op.name + ".backward", 2 * op.linear_flops, 2 * op.attention_flops,
                                2 * op.memory_bytes, backward_kernels(op.kernels)))
            elif op.communicator == "cp":
                ops.append(Call(op.name, "cp", "sendrecv", 2 * op.size_bytes, op.overlap))
            else:
                ops.append(op)
        return ops

    def _recomputed(self, layer: int) -> list:
        """What selective recomputation runs again before `layer`'s backward: its Megatron-Core modules that
        the layer has (`ParallelConfig.recompute_modules`; default `core_attn`)."""
        spec, par, tp, again = self.spec, self.par, self.par.tp, self.again
        moe = spec.is_moe_layer(layer)
        out: list = []
        for module in par.recompute_modules or ("core_attn",):
            if module == "core_attn":
                out.append(Work("recompute.attention_core", 0.0, self.attn_core, 2 * self.act, again["core_attn"]))
            elif module == "layernorm":
                out.append(Work("recompute.layernorm", 0.0, 0.0, 4 * self.act / tp, again["layernorm"]))
            elif module == "mla_up_proj" and spec.is_mla:
                up = spec.q_lora_rank * spec.num_heads * spec.qk_head_dim + spec.kv_lora_rank * spec.num_heads * (
                    spec.head_dim + spec.value_head_dim)
                out.append(Work("recompute.mla_up_proj", 2 * self.tokens * up / tp, 0.0, 2 * self.act,
                                again["mla_up_proj"]))
            elif module == "mlp" and not moe:
                out.append(Work("recompute.mlp", self.dense_mlp, 0.0, 2 * self.act, again["mlp"]))
            elif module == "moe" and moe:  # the whole layer again, its dispatch and combine too
                experts = Work("recompute.experts", self.moe_mlp, 0.0, 2 * self.act, again["moe"])
                out += [*map(lambda c: _renamed(c, "recompute."), self._ep("dispatch")), experts,
                        *map(lambda c: _renamed(c, "recompute."), self._ep("combine"))]
            elif module == "moe_act" and moe:
                out.append(Work("recompute.moe_act", 0.0, 0.0, 2 * self.act, again["moe_act"]))
            elif module == "shared_experts" and moe and spec.num_shared_experts:
                flops = 2 * spec.shared_expert_params() * self.tokens / tp
                out.append(Work("recompute.shared_experts", flops, 0.0, 2 * self.act, again["shared_experts"]))
        return out

    def unit_calls(self, layers: list[int], collective: str) -> tuple[Call, ...]:
        """ZeRO-3: one unit's parameter gather (or gradient reduce-scatter) on the dense and expert groups;
        built once per (kinds of its layers, collective): units of the same layers' kinds share it."""
        kinds = tuple(i if i < 0 else self.spec.is_moe_layer(i) for i in layers)
        key = (kinds, layers[0] < 0 and layers[0], collective)
        hit = self._units.get(key)
        if hit is not None:
            return hit
        width = PARAM_BYTES if collective == "allgather" else self.options.grad_bytes  # gradients reduced
        dense = sum(self.params(i)[0] for i in layers) * width
        expert = sum(self.params(i)[1] for i in layers) * width
        tag = f"{collective}.{'embedding' if layers[0] == EMBEDDING else 'output' if layers[0] == OUTPUT else 'unit'}"
        group = "shard" if self.shard else "dpcp"
        calls = [Call(f"dp.{tag}", group, collective, dense)] if dense > 0 else []
        if expert > 0:
            calls.append(Call(f"edp.{tag}", "edp", collective, expert))
        self._units[key] = out = tuple(c for c in calls if self._group(c.communicator) > 1)
        return out

    def _group(self, communicator: str) -> int:
        par = self.par
        return {"dpcp": par.dp * par.cp, "edp": par.edp, "shard": self.shard,
                "replica": (par.dp * par.cp) // self.shard if self.shard else 1}[communicator]


def _reached(spec: TransformerSpec, domains: int) -> float:
    """The share of `domains` NVLink domains, holding the experts evenly, that a token's top-k distinct
    experts reach: 1 less the chance that none of them lies in a given domain (DeepEP sends a token to each
    such domain once, and forwards it inside over NVLink)."""
    if domains <= 1 or not spec.is_moe:
        return 1.0
    e, k, miss = spec.num_experts, spec.experts_per_token, 1.0
    for i in range(k):
        miss *= max(0.0, (e - e / domains - i) / (e - i))
    return 1.0 - miss


def _renamed(op, prefix: str):
    if isinstance(op, Work):
        return Work(prefix + op.name, op.linear_flops, op.attention_flops, op.memory_bytes, op.kernels)
    return Call(prefix + op.name, op.communicator, op.collective, op.size_bytes, op.overlap)


def _units(layers: list[int], size: int) -> list[list[int]]:
    """FSDP units of `layers` (in model order): the embedding and the output layer alone, the rest in runs
    of `size` (0: one unit of everything)."""
    if size == 0:
        return [list(layers)]
    body = [i for i in layers if i >= 0]
    units = [[i] for i in layers if i == EMBEDDING]
    units += [body[k:k + size] for k in range(0, len(body), size)]
    return units + [[i] for i in layers if i == OUTPUT]


def _chunk(pieces: _Layers, stage: int, chunk: int, layers: list[int]) -> ChunkProgram:
    par = pieces.par
    offloaded = set([i for i in layers if i >= 0][:par.offload_layers])  # the chunk's first layers
    fwd_ops = {i: pieces.ops(i, F, i in offloaded) for i in layers}
    bwd_ops = {i: pieces.ops(i, B, i in offloaded) for i in layers}
    forward, backward = [], []
    fsdp = par.zero == 3
    units = _units(layers, pieces.options.fsdp_unit) if fsdp else [[i] for i in layers]
    for unit in units:
        gather = pieces.unit_calls(unit, "allgather") if fsdp else ()
        forward += [LayerPass(i, fwd_ops[i], gather if k == 0 else ()) for k, i in enumerate(unit)]
    for unit in reversed(units):
        gather = pieces.unit_calls(unit, "allgather") if fsdp else ()
        reduce = pieces.unit_calls(unit, "reduce_scatter") if fsdp else ()
        rev = list(reversed(unit))
        backward += [LayerPass(i, bwd_ops[i], gather if k == 0 else (), reduce if k == len(rev) - 1 else ())
                     for k, i in enumerate(rev)]
    dense = sum(pieces.params(i)[0] for i in layers)
    expert = sum(pieces.params(i)[1] for i in layers)
    buckets = _buckets(pieces, layers) if not fsdp and par.dp * par.cp > 1 else ()
    return ChunkProgram(stage, chunk, tuple(layers), tuple(forward), tuple(backward), buckets, dense, expert)


def _buckets(pieces: _Layers, layers: list[int]) -> tuple[Bucket, ...]:
    """ZeRO 0-2: Megatron's gradient buckets of a chunk, filled in backward order (module doc)."""
    par = pieces.par
    given = pieces.options.bucket_params
    limit = (max(BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_RANK * par.dp * par.cp) if given is None else
             given if given > 0 else float("inf"))
    out, run, count = [], [], 0.0
    order_ = list(reversed(layers))
    for k, i in enumerate(order_):
        run.append(i)
        count += sum(pieces.params(i)) * par.tp  # Megatron counts the full tensors of the bucket's layers
        if count >= limit or k == len(order_) - 1:
            reduce = pieces.unit_calls(run, "allreduce" if par.zero == 0 else "reduce_scatter")
            gather = pieces.unit_calls(run, "allgather") if par.zero >= 1 else ()
            out.append(Bucket(tuple(run), reduce, gather))
            run, count = [], 0.0
    return tuple(out)


def _sends(pieces: _Layers, stage: int) -> list[Send]:
    """The pipeline messages of `stage` per step: for every forward an activation to the stage that runs
    the next chunk's layers, for every backward a gradient to the one before (interleaved: the last
    stage sends chunk v's output to the first stage's chunk v + 1)."""
    par = pieces.par
    if par.pp == 1:
        return []
    size = pieces.act / (par.tp if par.sequence_parallel else 1)  # Megatron's scatter-gather of activations
    counts = _send_counts(par.pp, par.vp, par.num_microbatches, stage)
    return [Send(Call(f"pp.send.{what}", "pp", "sendrecv", size), peer, n) for (what, peer), n in counts]


@lru_cache(maxsize=4096)
def _send_counts(pp: int, vp: int, num_microbatches: int, stage: int) -> tuple:
    """((what, peer stage), count) of a stage's pipeline messages per step, from its schedule (`_sends`); the
    same for every configuration of the pipeline's shape (a plan asks thousands of times)."""
    counts: dict[tuple[str, int], int] = {}
    for kind, chunk, _ in order(pp, vp, num_microbatches, stage):
        if kind == F and not (stage == pp - 1 and chunk == vp - 1):
            key = ("activation", (stage + 1) % pp)
        elif kind == B and not (stage == 0 and chunk == 0):
            key = ("gradient", (stage - 1) % pp)
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    return tuple(counts.items())


def check_options(par: ParallelConfig, options: ProgramOptions) -> None:
    """A ValueError that says what to change when the framework's switches do not fit the job."""
    if options.fsdp_unit < 0:
        raise ValueError(f"--fsdp-unit {options.fsdp_unit}: give layers per FSDP unit, >= 1 (0: the whole chunk)")
    if options.moe_dispatcher not in DISPATCHERS:
        raise ValueError(f"--moe-dispatcher {options.moe_dispatcher!r}: use {', '.join(DISPATCHERS)}")
    if options.shard_group and (par.dp * par.cp) % options.shard_group:
        raise ValueError(f"--shard-group {options.shard_group} must divide dp x cp = {par.dp * par.cp}")
    if options.shard_group and par.zero != 3:
        raise ValueError("--shard-group (HSDP) shards the parameters: it needs --zero 3")


def build_program(spec: TransformerSpec, par: ParallelConfig, options: ProgramOptions = ProgramOptions()
                  ) -> StepProgram:
    """The step's program for every stage (module doc)."""
    check_options(par, options)
    pieces = _Layers(spec, par, options)
    per_chunk = layers_of_chunks(spec.num_layers, par.pp * par.vp)
    chunks, first = {}, 0
    for i, n in enumerate(per_chunk):
        stage, v = i % par.pp, i // par.pp
        layers = list(range(first, first + n))
        if i == 0:
            layers = [EMBEDDING, *layers]
        if i == len(per_chunk) - 1:
            layers = [*layers, OUTPUT]
        chunks[(stage, v)] = _chunk(pieces, stage, v, layers)
        first += n
    step_calls, optimizer = {}, []
    for s in range(par.pp):
        held = [chunks[(s, v)] for v in range(par.vp)]
        dense, expert = sum(c.dense_params for c in held), sum(c.expert_params for c in held)
        step_calls[s] = ([Call("replica.allreduce.shard", "replica", "allreduce",
                               dense / pieces.shard * options.grad_bytes)] if pieces.shard else [])
        shards = (pieces.shard or par.dp * par.cp, par.edp) if par.zero >= 1 else (1, 1)
        optimizer.append(dense / shards[0] + expert / shards[1])
    sends = {s: _sends(pieces, s) for s in range(par.pp)}
    return StepProgram(spec, par, options, chunks, sends, step_calls, optimizer)
