"""How fast one GPU runs the kernels of a training step, by their shape: GEMMs by M, N, K, flash attention by
batch, heads and sequence, memory-bound passes by bytes. One efficiency for every matrix misses that wide
GEMMs run closer to peak than narrow ones (on one H200 bf16 GEMMs run from under 400 to 754 TFLOP/s by
shape), so a step calibrated on one model size was 19-42 % off on others. The mechanisms:

* **GEMM**: t = latency + max(2 M N K / (peak x share x waves x K / (K + k0)), bytes / (bandwidth x copy)).
  - `waves`: output tiles are spread over the SMs in waves; a last, partial wave leaves SMs idle, and a
    tile that overhangs the matrix computes its padding. The libraries' Hopper kernels tile the output
    128 x 256 (either way round), so waves = M N / (ceil(tiles / SMs) x SMs x tile), for the better
    orientation. A grouped GEMM (the local experts' GEMMs of an MoE layer, each on the tokens routed to it)
    pools its GEMMs' tiles in the same waves: few tokens per expert leave the SMs idle and the tiles padded.
  - `K / (K + k0)`: each tile's main loop over K has a fixed prologue and epilogue, worth k0 of K.
  - `share`: what the main loop reaches of the data sheet's peak (clocks under the power limit).
  - `latency`: the per-kernel floor of back-to-back launches on the GPU (`fixed_s`: it does not move with
    the GPU's rates, nor with a calibrated scale). The host's dispatch of each kernel is apart
    (`fabric/host.py`, `launches`).
* **Flash attention** (causal: half the scores are computed): the same share-of-peak form with its own
  shares, forward and backward (the backward does 2.5 x the forward's FLOPs), over tiles of 128 queries
  per (batch, head).
* **Memory-bound** passes (norms, residual adds, activations, softmax of the loss, the optimizer): bytes /
  (bandwidth x copy share), plus a small kernel's floor per kernel (`SMALL_KERNEL_S`).

The shares are measured: `fit_kernel_table` fits them to a kernel table (`fabriclab calibrate kernels`;
the H200 table shipped in `fabric/data/kernels-h200.csv` gives the Hopper defaults, `default_kernels` in
`fabric/kernel_defaults.py`). They carry to another GPU of the same generation by its data-sheet peak,
bandwidth and SM count (H200 -> H100: the GEMMs of a table measured on an H100 land 2 % from the H200
fit's prediction, median); to another generation they are an assumption, and the range says so.

Try it: `python -c "from fabriclab.fabric.kernel_defaults import default_kernels; from fabriclab.fabric.kernels
import Gemm; from fabriclab.fabric.gpus import gpu_preset; g = gpu_preset('h100'); k = default_kernels(g);
print(k.source); print(k.time_s(Gemm(8192, 8192, 8192), g, 'bf16'))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabriclab.fabric.gpus import GpuSpec

# Output tiles of the libraries' Hopper GEMM kernels: 128 x 256 either way round (CUTLASS's default), or
# 128 x 128 where it fills the SMs better, at a lower share (less reuse of each operand it loads).
TILES = ((128, 256), (256, 128))
SMALL_TILE = (128, 128)
ATTENTION_TILE = 128  # queries per flash-attention thread block (FlashAttention-2/3 on Hopper)
ATTENTION_BACKWARD_FLOPS = 2.5  # backward FLOPs per forward FLOP of flash attention (dQ, dK, dV, recomputed P)
# A small kernel's floor on the GPU (a memory-bound pass, a device-to-host copy): an empty kernel runs 0.72 us
# and the dispatch gap between kernels is 0.55 us (NVIDIA/Megatron-LM#6453, measured in CUDA-graph replay);
# the fitted `latency_s` is a GEMM's own floor (its prologue, epilogue and tail), not a launch's.
SMALL_KERNEL_S = 1.3e-6
# Transformer Engine runs a grouped GEMM as one cuBLAS GEMM per expert over 4 CUDA streams
# (`general_grouped_gemm`, NVTE_... num_streams 4; Megatron-Core's --moe-grouped-gemm, "multi-stream + cuBLAS"
# in NVIDIA's DeepSeek-V3 GB200 guide): the GPU pays a launch per round of 4.
GROUPED_STREAMS = 4
MEMO_SIZE = 200_000  # kernels a model remembers the time of (`KernelModel.parts_s`) before it starts afresh


@dataclass(frozen=True)
class Gemm:
    """A matrix multiplication C[m, n] = A[m, k] B[k, n], `count` times (e.g. one per local expert)."""

    m: float
    n: float
    k: float
    count: float = 1
    bf16: bool = False
    """Runs in bf16 whatever the step's precision (Transformer Engine keeps the output layer in bf16)."""
    chunks: int = 1
    """Run as this many GEMMs of m / chunks rows each (TP overlap's ring exchange: one per TP rank), on
    Transformer Engine's compute streams, their tiles pooled as a grouped GEMM's: a chunk's partial wave
    is filled by the next, so the overlap does not slow the GEMM it hides communication behind."""
    grouped: bool = False
    """The `count` GEMMs run together (an MoE layer's grouped GEMM): their tiles share the SMs' waves, and
    the GPU pays a launch per round of GROUPED_STREAMS of them; the host still dispatches each."""
    routed: bool = False
    """Runs on the tokens routed to this rank's experts: a dropless MoE's shapes change every step, so CUDA
    graphs cannot capture it (`fabric/host.py`)."""

    @property
    def flops(self) -> float:
        return 2 * self.m * self.n * self.k * self.count


@dataclass(frozen=True)
class Attention:
    """Flash attention of `batch` x `heads` heads: `seq_q` queries against `seq_k` keys, head dim `head_dim`."""

    batch: float
    heads: float
    seq_q: float
    seq_k: float
    head_dim: float
    causal: bool = True
    backward: bool = False
    value_dim: float = 0
    """Width of a value head where it differs from the query's and key's (MLA: 128 beside 192); 0: head_dim."""

    @property
    def flops(self) -> float:
        """FLOPs the kernel really computes (causal: half the scores): 2 b h sq sk (d_qk + d_v)."""
        dims = self.head_dim + (self.value_dim or self.head_dim)
        f = 2 * self.batch * self.heads * self.seq_q * self.seq_k * dims * (0.5 if self.causal else 1)
        return f * (ATTENTION_BACKWARD_FLOPS if self.backward else 1)


@dataclass(frozen=True)
class MemoryPass:
    """Memory-bound kernels: `bytes` read and written in device memory over `kernels` launches."""

    bytes: float
    kernels: int = 1
    backward_bytes: float | None = None
    """The bytes of its backward; None: twice `bytes` (a gradient read with the saved input, one written)."""
    routed: bool = False
    """On the tokens routed to this rank's experts (as `Gemm.routed`)."""


@dataclass(frozen=True)
class HostSync:
    """The host waits for the GPU here: a dropless MoE layer copies its tokens per expert to the host before
    it can size the grouped GEMM (Megatron-Core's token dispatchers), so the host cannot run ahead across
    it (`fabric/host.py`). One small device-to-host copy on the GPU; its backward has none (the shapes are
    known by then)."""

    routed: bool = True


@dataclass(frozen=True, kw_only=True)
class KernelModel:
    """The shares of a GPU's data-sheet rates that its kernels reach, by shape (module doc)."""

    gemm_share: dict[str, float]
    """Precision -> share of the peak a GEMM's main loop reaches."""
    gemm_k0: dict[str, float]
    """Precision -> the fixed cost of a tile's K loop, in elements of K."""
    latency_s: float
    """Per kernel: the floor of back-to-back launches."""
    attention_share: float
    """Flash attention forward: share of the bf16 peak."""
    attention_backward_share: float
    small_tile_share: float = 1.0
    """The 128 x 128 tile's speed relative to the large tiles'."""
    copy_share: float
    """Memory-bound kernels: share of the data sheet's HBM bandwidth (a large copy's read + write)."""
    source: str
    error: float
    """Relative spread (rms of log time) of the measured large kernels around the model: the model's range."""

    def __post_init__(self) -> None:
        for name in ("latency_s", "attention_share", "attention_backward_share", "copy_share", "small_tile_share",
                     "error"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                    or value < 0 or (name.endswith("share") and not 0 < value <= 1):
                raise ValueError(f"kernel model: {name} is {value!r}; give a number >= 0 (a share in (0, 1])")
        for key, value in self.gemm_share.items():
            if not 0 < value <= 1:
                raise ValueError(f"kernel model: gemm_share.{key} is {value!r}; give a share in (0, 1]")

    def gemm_s(self, g: Gemm, gpu: GpuSpec, precision: str) -> float:
        return sum(self.gemm_parts(g, gpu, precision))

    def gemm_parts(self, g: Gemm, gpu: GpuSpec, precision: str) -> tuple[float, float]:
        """(work, fixed) seconds of a GEMM (`time_s` is their sum)."""
        prec = "bf16" if g.bf16 or precision not in self.gemm_share else precision
        if g.m <= 0 or g.n <= 0 or g.k <= 0:
            return 0.0, 0.0
        if g.chunks > 1:  # TP overlap's chunks go round Transformer Engine's compute streams: pooled tiles
            return self.gemm_parts(Gemm(g.m / g.chunks, g.n, g.k, g.count * g.chunks, g.bf16, grouped=True), gpu,
                                   precision)
        pooled = g.count if g.grouped else 1
        waves = wave_share(g.m, g.n, gpu.num_sms, self.small_tile_share, pooled)
        rate = gpu.peak(prec) * self.gemm_share[prec] * waves * g.k / (g.k + self.gemm_k0[prec])
        width = 1 if prec == "fp8" else 2
        moved = (g.m * g.k + g.k * g.n) * width + g.m * g.n * 2
        work = max(2 * g.m * g.n * g.k / rate, moved / (gpu.memory_bandwidth_Bps * self.copy_share)) * g.count
        return work, self.latency_s * (math.ceil(g.count / GROUPED_STREAMS) if g.grouped else g.count)

    def attention_s(self, a: Attention, gpu: GpuSpec) -> float:
        return sum(self.attention_parts(a, gpu))

    def attention_parts(self, a: Attention, gpu: GpuSpec) -> tuple[float, float]:
        if a.seq_q <= 0 or a.batch * a.heads <= 0:
            return 0.0, 0.0
        blocks = a.batch * a.heads * math.ceil(a.seq_q / ATTENTION_TILE)
        sms = gpu.num_sms or blocks
        waves = blocks / (math.ceil(blocks / sms) * sms)
        share = self.attention_backward_share if a.backward else self.attention_share
        return a.flops / (gpu.peak("bf16") * share * waves), self.latency_s

    def memory_s(self, p: MemoryPass, gpu: GpuSpec) -> float:
        return sum(self.memory_parts(p, gpu))

    def memory_parts(self, p: MemoryPass, gpu: GpuSpec) -> tuple[float, float]:
        return p.bytes / (gpu.memory_bandwidth_Bps * self.copy_share), p.kernels * SMALL_KERNEL_S

    def time_s(self, kernel: Gemm | Attention | MemoryPass | HostSync, gpu: GpuSpec, precision: str) -> float:
        """Seconds of one kernel (or `count` like ones) on `gpu` in a step of `precision`."""
        return sum(self.parts_s(kernel, gpu, precision))

    def parts_s(self, kernel: Gemm | Attention | MemoryPass | HostSync, gpu: GpuSpec,
                precision: str) -> tuple[float, float]:
        """(work, fixed) seconds of a kernel: what runs at the GPU's rates (a calibrated scale acts on it) and
        the launches' floor (module doc). Remembered per model, by the kernel and the GPU's rates it reads: a
        plan times the same shapes over thousands of configurations."""
        memo = self.__dict__.get("_memo")
        if memo is None or len(memo) > MEMO_SIZE:
            memo = {}
            object.__setattr__(self, "_memo", memo)  # a cache beside the fields, not one of them
        key = (kernel, precision, gpu.num_sms, gpu.memory_bandwidth_Bps, gpu.peak_flops.get(precision),
               gpu.peak_flops.get("bf16"))
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self._parts(kernel, gpu, precision)
        return hit

    def _parts(self, kernel, gpu: GpuSpec, precision: str) -> tuple[float, float]:
        if isinstance(kernel, Gemm):
            return self.gemm_parts(kernel, gpu, precision)
        if isinstance(kernel, Attention):
            return self.attention_parts(kernel, gpu)
        if isinstance(kernel, HostSync):
            return 0.0, SMALL_KERNEL_S
        return self.memory_parts(kernel, gpu)

    def to_dict(self) -> dict:
        return {"gemm_share": dict(self.gemm_share), "gemm_k0": dict(self.gemm_k0), "latency_s": self.latency_s,
                "attention_share": self.attention_share, "attention_backward_share": self.attention_backward_share,
                "small_tile_share": self.small_tile_share, "copy_share": self.copy_share, "source": self.source, "error": self.error}


def wave_share(m: float, n: float, num_sms: int, small_tile_share: float = 1.0, groups: float = 1) -> float:
    """The share of the SMs' time a GEMM's output tiles keep busy with its M x N outputs, over the waves
    they run in, for the best tile (module doc); `groups` like GEMMs pooled in one grouped GEMM."""
    if num_sms <= 0:  # unknown SM count: no wave quantization
        return 1.0
    best = 0.0
    for (tm, tn), share in ((TILES[0], 1.0), (TILES[1], 1.0), (SMALL_TILE, small_tile_share)):
        tiles = math.ceil(groups * math.ceil(m / tm) * math.ceil(n / tn))
        best = max(best, share * groups * m * n / (math.ceil(tiles / num_sms) * num_sms * tm * tn))
    return best


def launches(kernel: Gemm | Attention | MemoryPass | HostSync) -> float:
    """Kernels the host dispatches for one of these (a grouped GEMM: one per expert; TP overlap's chunks
    each)."""
    if isinstance(kernel, Gemm):
        return kernel.count * kernel.chunks
    if isinstance(kernel, (Attention, HostSync)):
        return 1
    return kernel.kernels


def kernel_model_from_dict(value: dict, where: str = "compute.kernels") -> KernelModel:
    """A kernel model from its JSON form (a cluster file's `compute.kernels`); a ValueError names the field."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} is {value!r}: give the mapping `fabriclab calibrate kernels` writes")
    names = {"gemm_share", "gemm_k0", "latency_s", "attention_share", "attention_backward_share", "copy_share",
             "small_tile_share", "source", "error"}
    missing, extra = names - set(value), set(value) - names
    if missing or extra:
        raise ValueError(f"{where}: missing {sorted(missing)}, unknown {sorted(extra)}; write it with "
                         f"`fabriclab calibrate kernels`")
    for key in ("gemm_share", "gemm_k0"):
        if not isinstance(value[key], dict) or not value[key]:
            raise ValueError(f"{where}.{key} is {value[key]!r}: give a mapping of precision to a number")
    return KernelModel(**{k: (dict(v) if isinstance(v, dict) else v) for k, v in value.items()})

