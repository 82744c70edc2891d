"""GPU compute rooflines: peak tensor-core FLOP/s per precision, HBM capacity and bandwidth, from data sheets.

A `GpuSpec` is what a roofline needs of one GPU: its dense peak FLOP/s per precision (no 2:4 sparsity:
NVIDIA's data sheets print the sparse figure, twice the dense one, and mark it with an asterisk), its HBM
capacity and its HBM bandwidth. A cluster carries one in `ClusterModel.compute` (`fabric/cluster.py`);
the share of the peak a model's math reaches is measured (`fabriclab calibrate step`), never held here.

Precisions are `fp32` (CUDA cores), `tf32`, `fp16`, `bf16` and `fp8` (tensor cores, FP32 accumulate);
a precision a GPU lacks is absent (no `fp8` before Hopper). Sources, per preset:

* `v100`, `v100-pcie`: NVIDIA Tesla V100 data sheet (2020): tensor 125 TFLOP/s SXM2 / 112 PCIe, FP32
  15.7 / 14 TFLOP/s, 32 GB HBM2 at 900 GB/s.
* `a100-40gb`, `a100` (= `a100-80gb`): NVIDIA A100 data sheet (2021): BF16/FP16 312 TFLOP/s, TF32 156,
  FP32 19.5; 40 GB HBM2 at 1,555 GB/s, 80 GB HBM2e at 2,039 GB/s (SXM).
* `h100`: NVIDIA H100 data sheet (SXM: 80 GB HBM3 at 3.35 TB/s) and, for the dense tensor rates, the
  NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 SXM5): BF16/FP16 989.4 TFLOP/s, FP8 1,978.9,
  TF32 494.7, FP32 66.9 (the data sheet's 1,979 / 3,958 / 989 are with sparsity).
* `h200`: NVIDIA H200 data sheet (SXM): the H100's compute, 141 GB HBM3e at 4.8 TB/s.
* `b200`: NVIDIA's HGX B200 specifications, per GPU (Blackwell platform page, "HGX B200" column): FP8
  9 PFLOP/s, BF16/FP16 4.5, TF32 2.2 with sparsity (dense: half), FP32 75 TFLOP/s, 180 GB HBM3e at
  7.7 TB/s. The DGX B200 data sheet's 64 TB/s for 8 GPUs (8 TB/s each) is the earlier figure; 7.7 TB/s
  is what the driver's 7,680-bit bus at 3,996 MHz DDR gives (pytorch/ao PR 4002, measured on a B200).
* `b300` (Blackwell Ultra, HGX B300): NVIDIA's HGX specifications, "HGX B300" column, for 8 GPUs: FP8 72
  PFLOP/s, BF16/FP16 36, TF32 18 with sparsity (per GPU dense: 4.5, 2.25, 1.1 PFLOP/s, as B200), FP32 600
  TFLOP/s (75 per GPU), "up to 2.3 TB" of HBM3e (288 GB per GPU: 8 stacks of 12-high 36 GB); 7.7 TB/s per GPU
  (Verda, "NVIDIA GB300 NVL72: GPU Architecture & Performance", per-GPU table, which gives the dense rates
  above too). 160 SMs (NVIDIA technical blog "Inside NVIDIA Blackwell Ultra", 2025).
* `gb200`: a Blackwell GPU of a GB200 NVL72 (NVIDIA GB200 NVL72 page, for 72 GPUs: FP8 720 PFLOP/s, FP16/BF16
  360, TF32 180 with sparsity, i.e. per GPU dense 5, 2.5, 1.25 PFLOP/s; "up to 13.4 TB" HBM3e at 576 TB/s,
  i.e. 186 GB at 8 TB/s per GPU); it runs at 1.2 kW against B200's 1 kW, hence more than HGX B200's 2.25.
  FP32 80 TFLOP/s (Verda's table). 148 SMs, as B200.
* `gb300`: a Blackwell Ultra GPU of a GB300 NVL72 (NVIDIA GB300 NVL72 page: FP8 720 PFLOP/s, FP16/BF16 360
  with sparsity for 72 GPUs, "up to 20 TB" HBM3e at 576 TB/s, i.e. 278 GB at 8 TB/s per GPU; Verda's per-GPU
  table: 5 / 2.5 PFLOP/s dense, 279 GB). 160 SMs, as B300.

Each GPU also copies to host memory at `host_bandwidth_Bps` (activation offloading, `HOST_LINKS`): PCIe, or
NVLink-C2C to Grace on a GB200 / GB300.

Capacities are the data sheets' decimal gigabytes; the devices report a little more (an H100 80GB shows
81,559 MiB in nvidia-smi), so a fit check on them errs on the safe side.

Try it: `python -c "from fabriclab.fabric.gpus import gpu_for_name; print(gpu_for_name('NVIDIA H100 80GB HBM3'))"`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
# What a GPU copies to and from host memory per direction (HOST_LINKS: the sources), bytes/s: a PCIe x16 link's
# rate (Gen3 16 GB/s, Gen4 32, Gen5 64 per direction: PCI-SIG) less ~15 % of headers and DMA overhead (an
# estimate); NVLink-C2C, 900 GB/s both directions between a Grace and the two Blackwell GPUs of a GB200 / GB300
# superchip (NVIDIA's GB200 NVL72 and GB300 NVL72 specifications), 225 GB/s a direction for each GPU.
PCIE_GEN5_HOST_Bps = 0.85 * 64e9
HOST_LINKS = {"v100": 0.85 * 16e9, "v100-pcie": 0.85 * 16e9, "a100-40gb": 0.85 * 32e9, "a100-80gb": 0.85 * 32e9,
              "gb200": 900e9 / 2 / 2, "gb300": 900e9 / 2 / 2}


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """One GPU's compute roofline: dense peak FLOP/s per precision, HBM capacity and bandwidth."""

    name: str
    """GPU model, e.g. `H100-SXM5-80GB`."""
    peak_flops: dict[str, float]
    """Dense peak FLOP/s by precision (`fp32`, `tf32`, `fp16`, `bf16`, `fp8`); absent: not supported."""
    memory_bytes: float
    """HBM capacity, bytes."""
    memory_bandwidth_Bps: float
    """HBM bandwidth, bytes/s."""
    source: str
    """The data sheet (or whitepaper) the numbers come from."""
    num_sms: int = 0
    """Streaming multiprocessors (the kernel model's waves, `fabric/kernels.py`); 0: unknown, no waves."""
    generation: str = ""
    """Architecture (`volta`, `ampere`, `hopper`, `blackwell`): which measured kernel table carries to it."""
    host_bandwidth_Bps: float = PCIE_GEN5_HOST_Bps
    """GPU <-> host memory per direction, bytes/s (activation offloading): PCIe to the host CPU's memory, or
    NVLink-C2C to Grace's on a GB200 / GB300 (`HOST_LINKS`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.peak_flops, dict) or not self.peak_flops:
            raise ValueError(f"GPU {self.name!r}: give peak_flops as a mapping of precision to FLOP/s, "
                             f"e.g. {{'bf16': 989.4e12}}")
        for key, value in self.peak_flops.items():
            if key not in PRECISIONS:
                raise ValueError(f"GPU {self.name!r}: peak_flops has precision {key!r}; use "
                                 f"{', '.join(PRECISIONS)}")
            _check_positive(f"GPU {self.name!r}: peak_flops.{key}", value)
        _check_positive(f"GPU {self.name!r}: memory_bytes", self.memory_bytes)
        _check_positive(f"GPU {self.name!r}: memory_bandwidth_Bps", self.memory_bandwidth_Bps)
        _check_positive(f"GPU {self.name!r}: host_bandwidth_Bps", self.host_bandwidth_Bps)
        if not isinstance(self.num_sms, int) or isinstance(self.num_sms, bool) or not 0 <= self.num_sms <= 10_000:
            raise ValueError(f"GPU {self.name!r}: num_sms is {self.num_sms!r}; give the SM count (0: unknown)")

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s at `precision`; a ValueError names the precisions this GPU has."""
        if precision not in self.peak_flops:
            raise ValueError(f"GPU {self.name} has no {precision} peak: use one of {', '.join(self.peak_flops)}")
        return self.peak_flops[precision]


def _check_positive(what: str, value: object) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} is {value!r}; give a number > 0")


_V100 = "NVIDIA Tesla V100 data sheet (2020)"
_A100 = "NVIDIA A100 Tensor Core GPU data sheet (2021), SXM"
_H100 = ("NVIDIA H100 Tensor Core GPU data sheet (SXM) for memory; dense tensor rates of H100 SXM5 from "
         "the NVIDIA H100 Tensor Core GPU Architecture whitepaper")
_HOPPER = {"fp32": 66.9e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12, "fp8": 1978.9e12}
# Volta's tensor cores multiply FP16 only (no BF16): a BF16 model runs its math at FP16's tensor rate at
# best (mixed precision in FP16), so `bf16` holds that rate and a roofline in bf16 works on a V100.
_VOLTA_SXM2 = {"fp32": 15.7e12, "fp16": 125e12, "bf16": 125e12}
_VOLTA_PCIE = {"fp32": 14e12, "fp16": 112e12, "bf16": 112e12}
# SM counts: V100 80 (Volta whitepaper), A100 108 (A100 whitepaper), H100 / H200 SXM 132 (H100 whitepaper),
# B200 148 (as the device reports: 148 SMs, e.g. `torch.cuda.get_device_properties` on a B200).
_VOLTA = {"num_sms": 80, "generation": "volta"}
_AMPERE_SMS = {"num_sms": 108, "generation": "ampere"}
_HOPPER_SMS = {"num_sms": 132, "generation": "hopper"}
_AMPERE = {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12}
# Blackwell's dense rates: B200 and B300 in HGX boards (1-1.1 kW), and GB200 / GB300 in NVL72 racks (1.2-1.4 kW)
# run the same tensor rates within each pair (sources below, per preset).
_BLACKWELL_HGX = {"fp32": 75e12, "tf32": 1.1e15, "fp16": 2.25e15, "bf16": 2.25e15, "fp8": 4.5e15}
_BLACKWELL_NVL72 = {"fp32": 80e12, "tf32": 1.25e15, "fp16": 2.5e15, "bf16": 2.5e15, "fp8": 5e15}

GPU_PRESETS: dict[str, GpuSpec] = {
    "v100": GpuSpec(name="V100-SXM2-32GB", peak_flops=_VOLTA_SXM2, memory_bytes=32e9, memory_bandwidth_Bps=900e9,
                    source=f"{_V100}: V100 SXM2, tensor 125 TFLOP/s, FP32 15.7, 32 GB HBM2 at 900 GB/s",
                    **_VOLTA),
    "v100-pcie": GpuSpec(name="V100-PCIE-32GB", peak_flops=_VOLTA_PCIE, memory_bytes=32e9,
                         memory_bandwidth_Bps=900e9,
                         source=f"{_V100}: V100 PCIe, tensor 112 TFLOP/s, FP32 14, 32 GB HBM2 at 900 GB/s", **_VOLTA),
    "a100-40gb": GpuSpec(name="A100-SXM4-40GB", peak_flops=_AMPERE, memory_bytes=40e9,
                         memory_bandwidth_Bps=1.555e12,
                         source=f"{_A100}: BF16 312 TFLOP/s, TF32 156, FP32 19.5, 40 GB HBM2 at 1,555 GB/s", **_AMPERE_SMS),
    "a100-80gb": GpuSpec(name="A100-SXM4-80GB", peak_flops=_AMPERE, memory_bytes=80e9,
                         memory_bandwidth_Bps=2.039e12,
                         source=f"{_A100}: BF16 312 TFLOP/s, TF32 156, FP32 19.5, 80 GB HBM2e at 2,039 GB/s",
                         **_AMPERE_SMS),
    # memory: nvidia-smi's memory.total of an "H100 80GB HBM3", 81,559 MiB = 85.5e9 B (measured 2026-11-27,
    # docs/measurements/h100-2026-11-27/gpu.txt): the data sheet's "80GB" are GiB, not 80e9 bytes
    "h100": GpuSpec(name="H100-SXM5-80GB", peak_flops=_HOPPER, memory_bytes=81559 * 2**20,
                    memory_bandwidth_Bps=3.35e12, source=f"{_H100}: BF16 989.4 TFLOP/s, FP8 1,978.9, 80 GB HBM3 "
                    f"(81,559 MiB by nvidia-smi) at 3.35 TB/s", **_HOPPER_SMS),
    "h200": GpuSpec(name="H200-SXM-141GB", peak_flops=_HOPPER, memory_bytes=141e9, memory_bandwidth_Bps=4.8e12,
                    source=f"NVIDIA H200 Tensor Core GPU data sheet (SXM): the H100's compute ({_H100}), "
                           f"141 GB HBM3e at 4.8 TB/s", **_HOPPER_SMS),
    "b200": GpuSpec(name="B200-SXM-180GB",
                    peak_flops=_BLACKWELL_HGX,
                    memory_bytes=180e9, memory_bandwidth_Bps=7.7e12,
                    source="NVIDIA HGX B200 specifications, per GPU (half the sparse tensor figures): BF16 "
                           "2.25 PFLOP/s, FP8 4.5, TF32 1.1, FP32 75 TFLOP/s, 180 GB HBM3e at 7.7 TB/s",
                    num_sms=148, generation="blackwell"),
    "b300": GpuSpec(name="B300-SXM-288GB",
                    peak_flops=_BLACKWELL_HGX,
                    memory_bytes=288e9, memory_bandwidth_Bps=7.7e12,
                    source="NVIDIA HGX B300 specifications, per GPU (half the sparse tensor figures): BF16 2.25 "
                           "PFLOP/s, FP8 4.5, 288 GB HBM3e (2.3 TB per 8); 7.7 TB/s (Verda's per-GPU table)",
                    num_sms=160, generation="blackwell"),
    "gb200": GpuSpec(name="GB200-B200-186GB",
                     peak_flops=_BLACKWELL_NVL72,
                     memory_bytes=13.4e12 / 72, memory_bandwidth_Bps=576e12 / 72,
                     source="NVIDIA GB200 NVL72 specifications / 72 GPUs (half the sparse tensor figures): BF16 "
                            "2.5 PFLOP/s, FP8 5, 13.4 TB HBM3e at 576 TB/s (186 GB at 8 TB/s per GPU)",
                     num_sms=148, generation="blackwell"),
    "gb300": GpuSpec(name="GB300-B300-278GB",
                     peak_flops=_BLACKWELL_NVL72,
                     memory_bytes=20e12 / 72, memory_bandwidth_Bps=576e12 / 72,
                     source="NVIDIA GB300 NVL72 specifications / 72 GPUs (half the sparse tensor figures): BF16 "
                            "2.5 PFLOP/s, FP8 5, 20 TB HBM3e at 576 TB/s (278 GB at 8 TB/s per GPU)",
                     num_sms=160, generation="blackwell"),
}
GPU_PRESETS = {k: replace(v, host_bandwidth_Bps=HOST_LINKS.get(k, v.host_bandwidth_Bps)) for k, v in GPU_PRESETS.items()}
_ALIASES = {"a100": "a100-80gb"}
GPU_PRESET_NAMES = (*GPU_PRESETS, *_ALIASES)


def gpu_preset(name: str) -> GpuSpec:
    """The GPU preset `name` (case-insensitive: `a100`, `a100-40gb`, `h100`, `h200`, `b200`, `v100`, ...);
    a ValueError lists them."""
    key = name.strip().lower() if isinstance(name, str) else ""
    key = _ALIASES.get(key, key)
    if key not in GPU_PRESETS:
        raise ValueError(f"no GPU preset {name!r}: use one of {', '.join(GPU_PRESET_NAMES)}")
    spec = GPU_PRESETS[key]
    return replace(spec, peak_flops=dict(spec.peak_flops))  # a copy: a caller's edit leaves the preset alone


# Names as nccl-tests and nvidia-smi print them ("NVIDIA H100 80GB HBM3", "A100-SXM4-40GB", "Tesla
# V100-PCIE-32GB"), first match wins. A family's other form factors (H100 PCIe / NVL, H200 NVL, A100 80GB
# PCIe, GH200 / GB200, V100S) run at other clocks or memory rates: they match nothing rather than borrow
# the SXM part's numbers. The A100 40GB PCIe card has the SXM4 40GB's peaks and 1,555 GB/s (A100 data sheet).
_OTHER_FORMS = re.compile(r"PCIE|NVL(?!72)|(?<![A-Z0-9])GH200|V100S")
_NAME_RULES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), key) for p, key in (
    (r"(?<![A-Z0-9])GB200(?![0-9])", "gb200"),
    (r"(?<![A-Z0-9])GB300(?![0-9])", "gb300"),
    (r"(?<![A-Z0-9])B300(?![0-9])", "b300"),
    (r"(?<![A-Z0-9])B200(?![0-9])", "b200"),
    (r"(?<![A-Z0-9])H200(?![0-9])", "h200"),
    (r"(?<![A-Z0-9])H100(?![0-9])", "h100"),
    (r"(?<![A-Z0-9])A100(?![0-9]).*40 ?GB", "a100-40gb"),
    (r"(?<![A-Z0-9])A100(?![0-9])", "a100-80gb"),
))
_V100 = re.compile(r"(?<![A-Z0-9])V100(?![0-9S])")


def same_gpu(name: str, other: str) -> bool:
    """Whether two names stand for one GPU: the same preset (`NVIDIA H100 80GB HBM3` and `H100-SXM5-80GB`),
    or, for GPUs fabriclab does not know, the same name ignoring case."""
    ours, theirs = gpu_for_name(name), gpu_for_name(other)
    if ours is not None and theirs is not None:
        return ours.name == theirs.name
    return str(name).strip().lower() == str(other).strip().lower()


def gpu_for_name(gpu_name: str) -> GpuSpec | None:
    """The preset a GPU name stands for (`A100-SXM4-40GB`, `NVIDIA H100 80GB HBM3`, `Tesla V100-PCIE-32GB`);
    None when the name says nothing fabriclab knows."""
    name = gpu_name.upper() if isinstance(gpu_name, str) else ""
    if _V100.search(name):
        spec = gpu_preset("v100-pcie" if "PCIE" in name else "v100")
        # the V100 data sheet's other capacity: 16 GB at the same rates
        return replace(spec, name=spec.name.replace("32GB", "16GB"), memory_bytes=16e9) if "16GB" in name else spec
    a100_40gb_pcie = "A100" in name and "PCIE" in name and re.search(r"40 ?GB", name)
    if _OTHER_FORMS.search(name) and not a100_40gb_pcie:
        return None
    return next((gpu_preset(key) for pattern, key in _NAME_RULES if pattern.search(name)), None)
