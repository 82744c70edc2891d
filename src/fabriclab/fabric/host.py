"""The host's side of a training step: the CPU dispatches every kernel the GPU runs, and the GPU waits when
the host falls behind (many small kernels: fine-grained MoE layers, FP8's casts, small micro-batches, fast
GPUs). The step model (`whatif/llm/step.py`) runs each layer at max(GPU time, host time), the host cut short
where it must wait for the GPU (a dropless MoE layer's tokens per expert, `fabric/kernels.HostSync`).

How a framework dispatches (`HOSTS`):

* `eager`: PyTorch eager from Python, a kernel per op, each priced at the measured 11 us: a Python loop of
  `copy_` on the reference H200 issues one copy every 10.8 us (1 MiB and 16 MiB copies alike, whose bytes
  need 0.5 and 7.8 us; `shared/reference/gpu-h200/kernels.csv`), on the H100 every 11.5 us
  (`docs/measurements/h100-2026-11-27/kernels.csv`); its smallest GEMMs take 14-17 us, host-bound too.
  fabriclab's own trainer (`runtime/llm`) at trivial sizes on a 2-core Xeon: 9.6 us per aten op of a dense
  layer, 13.5 of an MoE layer (docs/moe.md says how it was measured). HuggingFace transformers and
  fabriclab's trainer run so.
* `te`: Megatron-Core with Transformer Engine, 5 us per kernel: a linear layer's quantize, GEMM and
  epilogue go out of one Python call into TE's C++ (`tex.generic_gemm`), so about two kernels per
  eager-priced call; the dispatch chain below Python (pybind, ATen dispatcher, cuBLAS heuristics,
  `cudaLaunchKernel`) is 3-10 us per op (J. Lin, "From PyTorch op to kernel launch").
* `cuda-graphs`: Megatron-Core's partial CUDA graphs (`--cuda-graph-scope attn moe_router moe_preprocess`):
  the static parts replay as one graph per op, a launch at `te`'s price; a dropless MoE layer's routed
  experts change shape every step, cannot be captured and go out kernel by kernel at `te`'s price
  (NVIDIA, "Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72": CUDA graphs took that run
  from 611 to 663 TFLOP/s, the host-side work behind the baseline's 494).

Try it: `python -c "from fabriclab.fabric.host import host_model; from fabriclab.fabric.kernels import Gemm;
h = host_model('te'); print(h.source); print(h.kernel_s(Gemm(128, 4096, 7168, count=8, grouped=True)))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabriclab.fabric.kernels import launches

HOSTS = ("eager", "te", "cuda-graphs")
EAGER_LAUNCH_S = 11e-6  # per kernel, PyTorch eager from Python (module doc: measured)
TE_LAUNCH_S = 5e-6  # per kernel, Transformer Engine's fused modules (module doc)


@dataclass(frozen=True, kw_only=True)
class HostModel:
    """What the host pays to dispatch a step's kernels (module doc)."""

    kind: str
    """How the framework dispatches: eager, te or cuda-graphs."""
    launch_s: float
    """Host seconds per kernel dispatched one by one."""
    graphed: bool = False
    """Static kernels replay in CUDA graphs, one launch per op; the routed experts' go one by one."""
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in HOSTS:
            raise ValueError(f"--host {self.kind!r}: give one of {', '.join(HOSTS)}")
        if not (isinstance(self.launch_s, (int, float)) and math.isfinite(self.launch_s) and self.launch_s >= 0):
            raise ValueError(f"host launch time {self.launch_s!r}: give seconds per kernel, >= 0")

    def kernel_s(self, kernel) -> float:
        """Host seconds to dispatch one kernel of the step program (`fabric/kernels.py`)."""
        if self.graphed and not getattr(kernel, "routed", False):
            return 0.0
        return launches(kernel) * self.launch_s

    def op_s(self, kernels: tuple) -> float:
        """Host seconds of one compute op's kernels: each kernel's dispatch, and a graph launch per op when
        graphed."""
        return sum(self.kernel_s(k) for k in kernels) + (self.launch_s if self.graphed and kernels else 0.0)


def host_model(kind: str = "te") -> HostModel:
    """The host of a framework (module doc); a ValueError names the kinds."""
    word = (kind or "").strip().lower()
    if word == "eager":
        return HostModel(kind="eager", launch_s=EAGER_LAUNCH_S,
                         source="PyTorch eager, 11 us per kernel (measured: a copy_ loop on the H200 and H100)")
    if word == "te":
        return HostModel(kind="te", launch_s=TE_LAUNCH_S,
                         source="Megatron-Core + Transformer Engine, 5 us per kernel")
    if word == "cuda-graphs":
        return HostModel(kind="cuda-graphs", launch_s=TE_LAUNCH_S, graphed=True,
                         source="partial CUDA graphs: a launch per op, routed experts 5 us per kernel")
    raise ValueError(f"--host {kind!r}: give one of {', '.join(HOSTS)} (how the framework dispatches kernels)")
