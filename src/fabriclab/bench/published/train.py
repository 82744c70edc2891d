"""Predictions of the published data-parallel training measurements (Zhang et al., Samsi et al., Horovod).

Baseline: Zhang et al.'s what-if as it stands (`whatif.costs` ring-addest: every worker has its own
link of the cluster's rate, `2S(N-1)/N / bw + (N-1) AddEst(S/N)`, 5 ms / 64 MiB fusion, V100 PyTorch logs).

Mechanisms (each in `whatif`, each input sourced in the rows' inputs):
* servers of G GPUs behind ONE NIC, joined by NVLink or PCIe, and NCCL's ring or tree by size
  (`whatif.servers`): with 2 servers NCCL 2.4's tree sends S through each NIC, the ring ~2S;
* the protocol's payload share of the link (`fabric.links` efficiencies: TCP, RoCE, Omni-Path);
* Horovod's background loop (`whatif.iteration.simulate_horovod_iteration`): every 5 ms (before Horovod
  0.21), or when the previous all-reduces end, it fuses what is ready into 64 MiB buffers;
* the batch and GPU of the measured setup (`whatif.profiles`: data-sheet or published single-GPU rates,
  tf_cnn_benchmarks' default batches, profiles built from layer FLOPs where no log exists);
* what Horovod adds beyond the network, calibrated on OTHER rows of the same source: over kernel TCP
  (Zhang et al.) a time per gradient tensor (Horovod hooks every tensor, negotiates it through the
  coordinator and copies it into and out of the fusion buffer) and a time per gradient byte; on RoCE
  (Horovod's docs) a slowdown of the compute (Zhang et al. Sec. 2.3 measured up to 15 %).

Try it: `fabriclab validate published --rows zhang-,samsi-25gbe,horovod-`.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from fabriclab.bench.published.data import PUBLISHED, Published, published
from fabriclab.bench.published.prediction import Input, Prediction
from fabriclab.fabric.links import link_preset
from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import MIB, FusionPolicy
from fabriclab.whatif.iteration import simulate_horovod_iteration, simulate_iteration
from fabriclab.whatif.profiles import (
    backward_share,
    flops_profile,
    scaled_profile,
    training_flops_rate,
)
from fabriclab.nccl.nccl24 import ServerAllReduce
from fabriclab.workload.addcost import builtin_add_cost
from fabriclab.workload.profile import Profile, load_profile
from fabriclab.workload.zoo import layer_table

GBPS = 1e9 / 8
TIME_OR_SIZE_FUSION = FusionPolicy()
# Horovod before 0.21: HOROVOD_CYCLE_TIME 5 ms, HOROVOD_FUSION_THRESHOLD 64 MiB (Horovod docs,
# "Tensor Fusion"; 0.21.0 changelog moved the cycle to 1 ms).
HOROVOD_FUSION = FusionPolicy(name="horovod", cycle_time_s=5e-3, fusion_threshold_bytes=64 * MIB)
# FP32 peak of the data sheets: V100 SXM2 15.7, V100 PCIe 14, P100 PCIe 9.3 TFLOP/s.
V100_SXM2_TFLOPS, V100_PCIE_TFLOPS, P100_PCIE_TFLOPS = 15.7, 14.0, 9.3
# tf_cnn_benchmarks' default batch per GPU when --batch_size is not given (models/resnet_model.py:
# resnet50 and resnet50_v1.5 64; models/vgg_model.py and inception_model.py: 32).
TF_CNN_DEFAULT_BATCH = {"resnet50": 64, "resnet50_v1.5": 64, "vgg16": 32, "inception_v3": 32}

_LOGS = "paper's repository: V100 logs (PyTorch 1.3, batch 32)"
_IN_BASE = (Input(name="fusion", value="5 ms / 64 MiB", source="paper: Zhang et al. Sec. 3.1"),
            Input(name="all-reduce cost", value="2S(N-1)/N/bw + (N-1) AddEst(S/N)",
                  source="paper: Zhang et al. Sec. 3.1"),
            Input(name="AddEst", value="V100 vector-add table",
                  source="paper's repository: cuda_vec_add.log (V100)"))


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


@cache
def _profile(model: str) -> Profile:
    return load_profile(model)


def _baseline_f(profile: Profile, workers: int, gbps: float) -> float:
    cost = CostModel(bandwidth_Bps=gbps * GBPS, num_workers=workers, add_cost=_add())
    return simulate_iteration(profile, TIME_OR_SIZE_FUSION, cost).iteration_s


@cache
def _add():
    return builtin_add_cost()


# ---------------------------------------------------------------- Zhang et al.: p3dn, Horovod over TCP

def _zhang_setup(row: Published) -> tuple[str, int, float]:
    """(profile name, servers, Gbps) of a Zhang row."""
    model = {"r50": "resnet50", "r101": "resnet101", "vgg16": "vgg16"}[row.key.split("-")[1]]
    servers = int(row.key.split("-")[2].removesuffix("srv"))
    gbps = float(row.key.split("-")[3].removesuffix("g"))
    return model, servers, gbps


def zhang_baseline(row: Published) -> Prediction:
    model, servers, gbps = _zhang_setup(row)
    p = _profile(model)
    it = _baseline_f(p, servers * 8, gbps)
    return Prediction(value=p.iteration_s / it, note="Zhang et al.'s what-if, one link per GPU",
                      inputs=(Input(name="profile", value=p.summary(), source=_LOGS),
                              Input(name="workers", value=f"{servers * 8} GPUs", source="paper: Sec. 2.1"),
                              Input(name="link", value=f"{gbps:g} Gbps per worker", source="paper: Sec. 2.2, 2.4"),
                              *_IN_BASE))


_NVLINK = link_preset("NVLink-V100")
_TCP = link_preset("100GbE").efficiency


@cache
def _zhang_iteration(model: str, servers: int, gbps: float) -> tuple[float, float, str, float]:
    """(iteration without transport overhead, t_batch, algorithms used, all-reduce seconds) on p3dn servers."""
    p = _profile(model)
    cost = ServerAllReduce(num_servers=servers, gpus_per_server=8, nic_Bps=gbps * GBPS * _TCP,
                           intra_Bps=_NVLINK.effective_bandwidth(True), nvlink=True)
    sizes = [b.size_bytes for b in HOROVOD_FUSION.buckets([g.size_bytes for g in p.grads],
                                                          [g.ready_s for g in p.grads])]
    algos = sorted({cost.algorithm_for(s) for s in sizes})
    r = simulate_horovod_iteration(p, HOROVOD_FUSION, cost)
    return r.iteration_s, p.iteration_s, "/".join(algos), r.comm_s


def transport_overhead(rows: list[Published]) -> tuple[float, float]:
    """Least-squares (s per gradient tensor, s per gradient byte), both >= 0, such that
    t_batch / f = iteration + per_tensor x tensors + per_byte x bytes on `rows` (Zhang rows): what
    Horovod over kernel TCP adds to an iteration beyond the network's time."""
    a, y = [], []
    for r in rows:
        model, servers, gbps = _zhang_setup(r)
        it, t_batch, _, _ = _zhang_iteration(model, servers, gbps)
        p = _profile(model)
        a.append([float(len(p.grads)), float(p.param_bytes)])
        y.append(t_batch / r.value - it)
    a, y = np.asarray(a), np.asarray(y)
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    if sol.min() >= 0:
        return float(sol[0]), float(sol[1])
    fits = [max(float(a[:, k] @ y / (a[:, k] @ a[:, k])), 0.0) for k in (0, 1)]
    resid = [float(((y - fits[k] * a[:, k]) ** 2).sum()) for k in (0, 1)]
    return (fits[0], 0.0) if resid[0] <= resid[1] else (0.0, fits[1])


def _fig1_spread(model: str) -> str:
    """Why Fig. 1 cannot pin a row of `model` closer: its largest rise with more servers (no error bars)."""
    label = {"resnet50": "r50", "resnet101": "r101", "vgg16": "vgg16"}[model]
    values = [published(f"zhang-{label}-{n}srv-100g").value for n in (2, 4, 8)]
    rise, at = max((values[i + 1] - values[i], i) for i in range(2))
    if rise < 0.01:
        return ""
    n = (2, 4, 8)[at]
    return (f"; Fig. 1 rises {rise * 100:.1f} pt from {n} to {2 * n} servers (one run each): a model not "
            f"better with more servers misses one of the two by >= {rise * 50:.1f} pt")


def zhang_mechanisms(row: Published) -> Prediction:
    model, servers, gbps = _zhang_setup(row)
    it, t_batch, algos, comm = _zhang_iteration(model, servers, gbps)
    others = [r for r in PUBLISHED if r.key.startswith("zhang-") and r.key.endswith("-100g") and r.key != row.key]
    per_tensor, per_byte = transport_overhead(others)
    p = _profile(model)
    tensors, nbytes = len(p.grads), p.param_bytes
    f = t_batch / (it + per_tensor * tensors + per_byte * nbytes)
    cal = "calibrated on: " + ", ".join(r.key.removeprefix("zhang-") for r in others)
    spread = _fig1_spread(model) if gbps == 100 else (
        f"; overhead from 100 Gbps rows added to a {gbps:g} Gbps wire ({comm * 1e3:.0f} ms/iteration, "
        f"{(it - t_batch) * 1e3:.0f} ms exposed): no 100 Gbps row shows how much a slower wire hides")
    return Prediction(value=f, note=f"servers share a NIC; NCCL 2.4 {algos}; Horovod loop; per-tensor and "
                      f"TCP overhead{spread}",
                      inputs=(Input(name="profile", value=p.summary(), source=_LOGS),
                              Input(name="servers", value=f"{servers} x 8 V100, NVLink, one NIC",
                                    source="paper: Sec. 2.1 (p3dn.24xlarge)"),
                              Input(name="NIC", value=f"{gbps:g} Gbps x {_TCP:.3f} TCP payload",
                                    source="paper: Sec. 2.2, 2.4; IEEE 802.3 framing, 1500 B MTU"),
                              Input(name="NVLink", value=f"{_NVLINK.effective_bandwidth(True) / 1e9:.0f} GB/s per GPU",
                                    source="data sheet: " + _NVLINK.description.split(';')[0]),
                              Input(name="algorithm", value=f"NCCL 2.4 ring/tree threshold: {algos}",
                                    source="paper: NCCL 2.4.8; NCCL 2.4.8 src/init.cc ncclTreeThreshold"),
                              Input(name="fusion", value="Horovod loop: 5 ms cycle, 64 MiB",
                                    source="paper: Horovod 0.18.2; docs: Horovod tensor fusion defaults"),
                              Input(name="Horovod per-tensor work", value=f"{per_tensor * 1e3:.3f} ms x {tensors} "
                                    "gradient tensors", source=f"{cal}; per tensor, Horovod 0.18 runs a hook (paper: "
                                    "Sec. 2.3), a coordinator request and a copy into and out of the fusion "
                                    "buffer (horovod/common/ops/gpu_operations.cc)"),
                              Input(name="TCP transport per byte", value=f"{per_byte * 1e9:.3f} ns/B x "
                                    f"{nbytes / 1e6:.0f} MB", source=cal)))


# ---------------------------------------------------------------- Samsi et al.: TX-GAIA, 25 GbE vs Omni-Path

SAMSI_GPUS = (4, 8, 16, 32, 64, 128, 256, 512)
SAMSI_MODELS = ("resnet50", "resnet50_v1.5", "vgg16", "inception_v3")
_GRID = (f"{len(SAMSI_MODELS)} models x GPUs {','.join(map(str, SAMSI_GPUS))}",
         "assumed: the paper averages 'all tests' without listing them; powers of two up to its 512 GPUs")


def _span(values: list[float]) -> str:
    lo, hi = f"{min(values):.0f}", f"{max(values):.0f}"
    return f"{lo} %" if lo == hi else f"{lo} to {hi} %"


def _drop(it_slow: float, it_fast: float) -> float:
    """Fewer images/sec on the slow fabric, percent."""
    return (1 - it_fast / it_slow) * 100


def samsi_baseline(row: Published) -> Prediction:
    drops = [_drop(_baseline_f(_profile(m), n, 25), _baseline_f(_profile(m), n, 100))
             for m in ("resnet50", "vgg16") for n in SAMSI_GPUS]
    return Prediction(value=float(np.mean(drops)), note="mean over ResNet50 and VGG16 (no profile of the "
                      "other two), one 25 or 100 Gbps link per GPU",
                      inputs=(Input(name="points", value=f"resnet50, vgg16 x GPUs {','.join(map(str, SAMSI_GPUS))}",
                                    source=_GRID[1]),
                              Input(name="profiles", value="V100 logs, batch 32", source=_LOGS),
                              Input(name="links", value="25 / 100 Gbps per GPU", source="paper: Sec. II.A"),
                              *_IN_BASE))


@cache
def samsi_profile(model: str) -> Profile:
    """The V100-PCIe profile of `model` at tf_cnn_benchmarks' default batch."""
    factor = V100_SXM2_TFLOPS / V100_PCIE_TFLOPS
    batch = TF_CNN_DEFAULT_BATCH[model]
    if model in ("resnet50", "vgg16"):
        return scaled_profile(_profile(model), time_factor=factor, batch_size=batch, device="V100 PCIe")
    if model == "resnet50_v1.5":
        flops = layer_table("resnet50_v1.5").forward_flops / layer_table("resnet50").forward_flops
        p = scaled_profile(_profile("resnet50"), time_factor=factor * flops, batch_size=batch, device="V100 PCIe")
        return Profile(**{**p.__dict__, "model": model})
    logs = [_profile("resnet50"), _profile("resnet101")]
    p = flops_profile(model, training_flops_rate(logs), 32, backward_share(logs))
    return scaled_profile(p, time_factor=factor, batch_size=batch, device="V100 PCIe")


_RATES = {"25gbe": link_preset("25GbE"), "opa": link_preset("OPA100")}
_PCIE3 = link_preset("PCIe3x16")


# NCCL 2.4 has no Omni-Path (PSM2) transport: on OPA it runs IB verbs (hfi1) or sockets. Verbs on OPA:
# Open MPI + UCX over /dev/infiniband/uverbs0, osu_put_bw 3763.70 MB/s at 4 MiB, against 12.3 GB/s over
# PSM2, on two nodes of 100 Gb OPA (openucx/ucx issue #3196, 2019).
OPA_VERBS_Bps = 3763.70e6


@cache
def samsi_iteration(model: str, gpus: int, fabric: str) -> float:
    rate = OPA_VERBS_Bps if fabric == "opa-verbs" else _RATES[fabric].effective_bandwidth(True)
    cost = ServerAllReduce(num_servers=gpus // 2, gpus_per_server=2, nic_Bps=rate,
                           intra_Bps=_PCIE3.effective_bandwidth(True), nvlink=False)
    return simulate_horovod_iteration(samsi_profile(model), HOROVOD_FUSION, cost).iteration_s


def samsi_mechanisms(row: Published) -> Prediction:
    def drops(opa: str) -> dict[str, list[float]]:
        return {m: [_drop(samsi_iteration(m, n, "25gbe"), samsi_iteration(m, n, opa)) for n in SAMSI_GPUS]
                for m in SAMSI_MODELS}

    per_model, verbs = drops("opa"), drops("opa-verbs")
    eth, opa = _RATES["25gbe"], _RATES["opa"]
    logs = "resnet50, resnet101 V100 logs (not rows)"
    spread = "; ".join(f"{m} {_span(d)}" for m, d in per_model.items())
    return Prediction(value=float(np.mean([d for v in per_model.values() for d in v])),
                      note=f"2 V100 per node share a NIC; NCCL 2.4; Horovod loop; per model: {spread}. "
                           "Fig. 5 calls the fabrics similar through 256 GPUs for every model, VGG16 "
                           f"included; with NCCL on OPA's verbs ({OPA_VERBS_Bps / 1e9:.1f} GB/s) VGG16 would "
                           f"drop {_span(verbs['vgg16'])}, the mean "
                           f"{np.mean([d for v in verbs.values() for d in v]):.1f} %: the paper does not say "
                           "which transport NCCL used on OPA",
                      inputs=(Input(name="points", value=_GRID[0], source=_GRID[1]),
                              Input(name="nodes", value="2 V100 PCIe per node, one NIC per fabric",
                                    source="paper: Sec. II.A, Fig. 2"),
                              Input(name="NICs", value=f"25 Gb/s x {eth.efficiency:.3f} RoCE; 100 Gb/s x "
                                    f"{opa.efficiency:.3f} Omni-Path", source="paper: Sec. II.A; fabric.links "
                                    "framing (RoCEv2 4 KiB MTU, OPA LTP)"),
                              Input(name="OPA over verbs (note only)", value=f"{OPA_VERBS_Bps / 1e9:.2f} GB/s",
                                    source="openucx/ucx issue #3196: osu_put_bw over OPA verbs, 4 MiB"),
                              Input(name="GPU to GPU", value=f"PCIe 3.0 x16, {_PCIE3.effective_bandwidth(True) / 1e9:.1f} GB/s",
                                    source="paper: Fig. 2 (no PCIe switch); PCI-SIG 3.0"),
                              Input(name="algorithm", value="NCCL 2.4 ring/tree threshold, no NVLink",
                                    source="assumed: NCCL 2.4 (TF 1.14 era); NCCL 2.4.8 src/init.cc"),
                              Input(name="fusion", value="Horovod: 5 ms cycle, 64 MiB",
                                    source="docs: Horovod defaults before 0.21"),
                              Input(name="compute", value=f"V100 logs x {V100_SXM2_TFLOPS / V100_PCIE_TFLOPS:.3f}",
                                    source="data sheets: V100 SXM2 15.7 / V100 PCIe 14 TFLOPS; paper: PCIe V100"),
                              Input(name="batch", value="ResNet50 (v1.5) 64, VGG16 32, InceptionV3 32",
                                    source="assumed: tf_cnn_benchmarks defaults (paper gives none)"),
                              Input(name="ResNet50 v1.5", value="ResNet50 log x FLOP ratio 1.06", source="zoo tables"),
                              Input(name="InceptionV3", value="from layer FLOPs", source="calibrated on: " + logs)))


# ---------------------------------------------------------------- Horovod: 128 servers x 4 Pascal GPUs, 25 GbE

HOROVOD_PROFILES = {"r101": "resnet101", "vgg16": "vgg16", "incv3": "inception_v3"}
_HOROVOD_BATCH = 64  # docs/benchmarks: `tf_cnn_benchmarks.py --model resnet101 --batch_size 64`


def _horovod_setup(row: Published) -> tuple[str, int]:
    _, label, gpus = row.key.split("-")
    return HOROVOD_PROFILES[label], int(gpus.removesuffix("gpu"))


def horovod_baseline(row: Published) -> Prediction:
    model, gpus = _horovod_setup(row)
    if model == "inception_v3":
        return Prediction(value=None, note="no InceptionV3 profile in the baseline what-if")
    p = _profile(model)
    return Prediction(value=p.iteration_s / _baseline_f(p, gpus, 25), note="Zhang et al.'s what-if on V100 logs",
                      inputs=(Input(name="profile", value=p.summary(), source=_LOGS),
                              Input(name="workers", value=f"{gpus}", source="docs: Horovod benchmarks"),
                              Input(name="link", value="25 Gbps per GPU", source="docs: Horovod benchmarks"),
                              *_IN_BASE))


# TensorFlow's benchmarks (tensorflow.org/performance/benchmarks, 2017): one P100 of a DGX-1, synthetic
# data, batch 64, tf_cnn_benchmarks: InceptionV3 142 and ResNet-50 219 images/sec.
P100_TF_IMAGES_PER_S = {"inception_v3": 142.0, "resnet50": 219.0}
_TF_P100 = "TensorFlow benchmarks page (DGX-1 P100, synthetic, batch 64): InceptionV3 142, ResNet-50 219 img/s"


def p100_time_factor() -> float:
    """Time of TF on a P100 over the V100 PyTorch log, calibrated on ResNet-50 (219 img/s at batch 64)."""
    log = _profile("resnet50")
    return (_HOROVOD_BATCH / P100_TF_IMAGES_PER_S["resnet50"]) / (log.iteration_s * _HOROVOD_BATCH / log.batch_size)


@cache
def horovod_profile(model: str) -> Profile:
    """`model` in TensorFlow on a Pascal P100 at batch 64."""
    if model == "inception_v3":
        logs = [_profile("resnet50"), _profile("resnet101")]
        base = flops_profile(model, 1.0, _HOROVOD_BATCH, backward_share(logs))
        rate = base.iteration_s * P100_TF_IMAGES_PER_S[model] / _HOROVOD_BATCH
        return flops_profile(model, rate, _HOROVOD_BATCH, backward_share(logs), device="P100 (TF)")
    return scaled_profile(_profile(model), time_factor=p100_time_factor(), batch_size=_HOROVOD_BATCH,
                          device="P100 (TF)")


@cache
def horovod_f(model: str, gpus: int, slowdown: float = 0.0) -> float:
    """Scaling factor on the Horovod cluster when distributed compute is `slowdown` slower than alone."""
    p = horovod_profile(model)
    eth = link_preset("25GbE")
    # NCCL 2.0-2.3 (Horovod 2017-2018) had rings only; trees came with NCCL 2.4 (2019).
    cost = ServerAllReduce(num_servers=gpus // 4, gpus_per_server=4, nic_Bps=eth.effective_bandwidth(True),
                           intra_Bps=_PCIE3.effective_bandwidth(True), nvlink=False, algorithm="ring")
    slowed = scaled_profile(p, time_factor=1 + slowdown) if slowdown else p
    return p.iteration_s / simulate_horovod_iteration(slowed, HOROVOD_FUSION, cost).iteration_s


SLOWDOWNS = tuple(i / 200 for i in range(61))  # 0 .. 30 % in steps of 0.5 %


def compute_slowdown(rows: list[Published]) -> float:
    """The slowdown of compute under Horovod (0-30 %) that fits `rows` best (least squares)."""
    setups = [(_horovod_setup(r), r.value) for r in rows]
    return min(SLOWDOWNS, key=lambda x: sum((horovod_f(m, g, x) - v) ** 2 for (m, g), v in setups))


def horovod_mechanisms(row: Published) -> Prediction:
    model, gpus = _horovod_setup(row)
    p = horovod_profile(model)
    eth = link_preset("25GbE")
    others = [r for r in PUBLISHED if r.key.startswith("horovod-") and r.key != row.key]
    slowdown = compute_slowdown(others)
    return Prediction(value=horovod_f(model, gpus, slowdown),
                      note="4 GPUs per server share a 25 GbE NIC; NCCL 2 ring; Horovod loop; compute slowdown",
                      inputs=(Input(name="profile", value=p.summary(),
                                    source=("layer FLOPs, backward share of the V100 logs; " if model == "inception_v3"
                                            else f"V100 log x {p100_time_factor():.3f}; ") + _TF_P100),
                              Input(name="batch", value="64", source="docs: Horovod benchmarks command"),
                              Input(name="servers", value=f"{gpus // 4} x 4 GPUs, one 25 GbE RoCE NIC",
                                    source="docs: Horovod benchmarks"),
                              Input(name="NIC", value=f"25 Gb/s x {eth.efficiency:.3f} RoCE",
                                    source="fabric.links framing (RoCEv2, 4 KiB MTU)"),
                              Input(name="GPU to GPU", value="PCIe 3.0 x16", source="assumed: Pascal PCIe servers"),
                              Input(name="algorithm", value="ring over all GPUs, 6 us per step",
                                    source="docs: NCCL 2.0-2.3 rings only; NCCL 2.4.8 init.cc ring latency"),
                              Input(name="fusion", value="Horovod loop: 5 ms cycle, 64 MiB",
                                    source="docs: Horovod defaults"),
                              Input(name="compute slowdown under Horovod", value=f"{slowdown * 100:.1f} %",
                                    source="calibrated on: " + ", ".join(r.key.removeprefix("horovod-")
                                                                         for r in others)
                                           + " (Zhang et al. Sec. 2.3 measured up to 15 %)")))
