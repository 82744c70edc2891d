"""The published measurements fabriclab's models are held to: value, paper, and where in the paper.

One `Published` per number a paper measured on a real cluster that one of our models can predict. The
setups (hardware, software) are in the predictors (`bench.published_train`, `bench.published_hpc`),
each input with its source. Papers:

* Zhang et al., "Is Network the Bottleneck of Distributed Training?" (NetAI'20): Horovod 0.18.2 over
  kernel TCP on AWS p3dn.24xlarge (8 V100 with NVLink, one 100 Gbps NIC), PyTorch, batch 32.
* Samsi et al., "Benchmarking network fabrics for data distributed training of deep neural networks"
  (TX-GAIA): 25 GbE RoCE vs 100 Gb Omni-Path, 2 V100 per node, Horovod + NCCL; and CartDG.
* Awan et al., "S-Caffe" (PPoPP'17): hierarchical reduce on Cray CS-Storm nodes of 16 K80 devices.
* NVIDIA's DGX Cloud benchmarking recipes (`dgxc-benchmarking`, `nemo_megatron/README_175b.md`, NeMo
  Megatron 24.x): GPT-3 175B weak scaling on 128-2048 H100 (DGX H100, 8 x 400 Gb/s NDR), TP4 PP8 VP6,
  MBS 1, 64 micro-batches per pipeline, BF16 and FP8 step times.
* Horovod's documentation (docs/benchmarks, README): 128 servers x 4 Pascal GPUs, RoCE 25 Gbit/s,
  tf_cnn_benchmarks with synthetic data; an earlier README gave the same on 32 servers.

Error kinds: `points` (scaling factors and percentages: predicted - published, in points of 100 %;
goal within 5), `relative` (ratios and speed-ups: (predicted - published) / published; goal within 10 %).

Try it: `python -c "from fabriclab.bench.published.data import PUBLISHED; print(len(PUBLISHED))"`.
"""

from __future__ import annotations

from dataclasses import dataclass

ZHANG = "Zhang et al. (NetAI'20)"
SAMSI = "Samsi et al. (TX-GAIA)"
AWAN = "Awan et al., S-Caffe (PPoPP'17)"
HOROVOD = "Horovod docs"
NEMO = "NVIDIA DGX Cloud recipes (NeMo Megatron, GPT-3 175B)"
# GPUs -> (BF16, FP8) step time in seconds; the recipe's README_175b.md
NEMO_GPT3_STEPS = {128: (8.309, 5.626), 256: (8.408, 5.725), 512: (8.42, 5.774), 1024: (8.453, 5.82),
                   2048: (8.49, 5.96)}
POINTS, RELATIVE = "points", "relative"
POINTS_GOAL, RELATIVE_GOAL = 5.0, 10.0


@dataclass(frozen=True, kw_only=True)
class Published:
    """One published measurement."""

    key: str
    """Short id, e.g. `zhang-r50-2srv-100g`."""
    paper: str
    """Who published it (authors, venue)."""
    where: str
    """Where in the paper or document the number is."""
    quantity: str
    """What was measured, in words."""
    value: float
    """The published value (scaling factors as fractions, percentages as percent, ratios as x)."""
    unit: str
    """`fraction`, `%`, `x` or `s` (seconds)."""
    error_kind: str
    """`points` or `relative` (module doc)."""


def _zhang(model: str, label: str, servers: int, value: float) -> Published:
    return Published(key=f"zhang-{label}-{servers}srv-100g", paper=ZHANG, where="Sec. 2.2 (Fig. 1)",
                     quantity=f"scaling factor, {model}, {servers} servers x 8 V100, 100 Gbps TCP",
                     value=value, unit="fraction", error_kind=POINTS)


_FIG1 = {("ResNet50", "r50"): (0.7505, 0.7424, 0.716), ("ResNet101", "r101"): (0.6892, 0.6628, 0.6699),
         ("VGG16", "vgg16"): (0.5599, 0.6301, 0.598)}

PUBLISHED: tuple[Published, ...] = (
    *(_zhang(model, label, servers, v) for (model, label), values in _FIG1.items()
      for servers, v in zip((2, 4, 8), values)),
    Published(key="zhang-r50-2srv-1g", paper=ZHANG, where="Sec. 2.4 (Fig. 3)",
              quantity="scaling factor, ResNet50, 2 servers x 8 V100, 1 Gbps TCP", value=0.13,
              unit="fraction", error_kind=POINTS),
    Published(key="zhang-r50-2srv-10g", paper=ZHANG, where="Sec. 2.4 (Fig. 3)",
              quantity="scaling factor, ResNet50, 2 servers x 8 V100, 10 Gbps TCP", value=0.68,
              unit="fraction", error_kind=POINTS),
    Published(key="samsi-25gbe-vs-opa", paper=SAMSI, where="Sec. IV.B (Figs. 4, 5)",
              quantity="images/sec fewer on 25 GbE RoCE than on 100 Gb Omni-Path, average of all tests",
              value=12.78, unit="%", error_kind=POINTS),
    Published(key="samsi-cartdg-comm-ratio", paper=SAMSI, where="Sec. IV.A (Fig. 3 and caption)",
              quantity="CartDG communication time, 25 GbE / Omni-Path ('identical')", value=1.0, unit="x",
              error_kind=RELATIVE),
    Published(key="awan-cc8-speedup", paper=AWAN, where="Sec. 6.6, Table 2",
              quantity="aggregation speed-up over SC-B's reduce, HR chain-chain, chain size 8", value=1.47,
              unit="x", error_kind=RELATIVE),
    Published(key="awan-cb4-speedup", paper=AWAN, where="Sec. 6.6, Table 2",
              quantity="aggregation speed-up over SC-B's reduce, HR chain-binomial, chain size 4",
              value=2.04, unit="x", error_kind=RELATIVE),
    Published(key="awan-cb8-speedup", paper=AWAN, where="Sec. 6.6, Table 2",
              quantity="aggregation speed-up over SC-B's reduce, HR chain-binomial, chain size 8",
              value=2.3, unit="x", error_kind=RELATIVE),
    Published(key="awan-cc8-over-cb8", paper=AWAN, where="Sec. 6.6, Table 2 (28.6 s / 17.6 s)",
              quantity="aggregation time of CC-8 over CB-8", value=28.6 / 17.6, unit="x", error_kind=RELATIVE),
    *(Published(key=f"horovod-{label}-{gpus}gpu", paper=HOROVOD, where=where,
                quantity=f"scaling efficiency, {model}, {gpus // 4} servers x 4 Pascal GPUs, 25 Gbit/s RoCE",
                value=value, unit="fraction", error_kind=POINTS)
      for gpus, where, values in ((512, "docs/benchmarks and README (2018-)", (0.90, 0.90, 0.68)),
                                  (128, "README of 2017 (32 servers)", (0.90, 0.90, 0.79)))
      for (model, label), value in zip((("Inception V3", "incv3"), ("ResNet-101", "r101"), ("VGG-16", "vgg16")),
                                       values)),
    *(Published(key=f"nemo-gpt3-{prec}-{gpus}gpu", paper=NEMO, where="nemo_megatron/README_175b.md",
                quantity=f"step time, GPT-3 175B, {gpus} H100, TP4 PP8 VP6, GBS {64 * gpus // 32}, {prec.upper()}",
                value=steps[i], unit="s", error_kind=RELATIVE)
      for i, prec in enumerate(("bf16", "fp8")) for gpus, steps in NEMO_GPT3_STEPS.items()),
    *(Published(key=f"nemo-gpt3-{prec}-scaling", paper=NEMO, where="nemo_megatron/README_175b.md",
                quantity=f"weak-scaling efficiency 128 -> 2048 H100 (step 128 / step 2048), {prec.upper()}",
                value=NEMO_GPT3_STEPS[128][i] / NEMO_GPT3_STEPS[2048][i], unit="fraction", error_kind=POINTS)
      for i, prec in enumerate(("bf16", "fp8"))),
)


def published(key: str) -> Published:
    """The row called `key`."""
    for row in PUBLISHED:
        if row.key == key:
            return row
    raise ValueError(f"no published row {key!r}; known: {', '.join(r.key for r in PUBLISHED)}")
