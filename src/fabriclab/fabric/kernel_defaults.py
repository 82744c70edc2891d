"""The kernel model a GPU gets when none was calibrated: the fit (`fabric/kernel_fit.py`) of the H200 kernel
table fabriclab ships (`fabric/data/kernels-h200.csv`), carried to another GPU by its data sheet
(`fabric/kernels.py` says how the shares carry, and where that is an assumption).

Try it: `python -c "from fabriclab.fabric.kernel_defaults import default_kernels; from fabriclab.fabric.kernels
import Gemm; from fabriclab.fabric.gpus import gpu_preset; g = gpu_preset('h100'); k = default_kernels(g);
print(k.source); print(k.time_s(Gemm(8192, 8192, 8192), g, 'bf16'))"`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from fabriclab.fabric.gpus import GpuSpec, gpu_preset
from fabriclab.fabric.kernel_fit import fit_kernel_table, read_kernel_table, shipped_table
from fabriclab.fabric.kernels import KernelModel

# The generation whose table the defaults come from, by SM count of the data sheet's part: Hopper is the
# only generation with a shipped table; the others borrow its shares, an assumption the range widens.
_CARRIED_ERROR = 0.15


@lru_cache(maxsize=1)
def hopper_kernels() -> KernelModel:
    """The Hopper defaults: the fit of the shipped H200 kernel table (`fabric/data/kernels-h200.csv`)."""
    model = fit_kernel_table(read_kernel_table(shipped_table()), gpu_preset("h200"))
    return replace(model, source="fit of one H200's kernel table (fabric/data/kernels-h200.csv, 2026-11-27)")


def default_kernels(gpu: GpuSpec) -> KernelModel:
    """The kernel model of `gpu` when none was calibrated: Hopper's fit, carried by the data sheet's rates
    (same generation: its error; another generation: widened to 15 %, an assumption said in `source`)."""
    base = hopper_kernels()
    if gpu.generation == "hopper":
        return base
    return replace(base, error=max(base.error, _CARRIED_ERROR),
                   source=f"{base.source}, carried to {gpu.name} ({gpu.generation or 'unknown generation'}) by "
                          f"its data sheet: not measured on it (range widened to {_CARRIED_ERROR:.0%})")
