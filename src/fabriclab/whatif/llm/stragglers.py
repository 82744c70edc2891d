"""Stragglers: a synchronous step runs at the pace of its slowest GPU, and the slowest of N grows with N.

GPUs of one model and SKU differ in speed: manufacturing variation and power management give each its own
clocks under load. Sinha et al. ("Not All GPUs Are Created Equal: Characterizing Variability in Large-Scale,
Accelerator-Rich Systems", SC22) measured over 90 % of the GPUs of five clusters (Summit, Vortex, Frontera,
Longhorn, Corona): 8 % average performance variation across a cluster's GPUs of one SKU (22 % at most),
outliers aside. Read as the range of a normal spread over a few hundred to 27,000 GPUs (2 x 2.9 to 2 x 3.9
standard deviations), that is a standard deviation of about 1 % of the mean speed (`GPU_SPREAD`; 1-1.4 %).

A data-parallel step waits for every replica at its gradient reduction, a pipeline for its slowest stage, a
TP group for its slowest member: the step's compute runs at the pace of the slowest of all N GPUs, whose
expected slowness is 1 + spread x E[max of N standard normals] (2.6 at 128 GPUs, 3.4 at 2,048, 4.4 at
100,000). A kernel table measures one GPU (a typical one), so the step model scales its compute by that
factor: weak scaling loses about 0.8 % from 128 to 2,048 GPUs at 1 % spread, with no fitted slope.

Try it: `python -c "from fabriclab.whatif.llm.stragglers import slowest_factor; print(slowest_factor(2048))"`.
"""

from __future__ import annotations

import math
from functools import lru_cache

GPU_SPREAD = 0.01
"""Standard deviation of the GPUs' speed over their mean (Sinha et al., SC22; module doc)."""


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (numerical integration; 0 for n = 1)."""
    if n < 1:
        raise ValueError(f"{n} GPUs: give at least 1")
    if n == 1:
        return 0.0
    step, total = 0.002, 0.0
    for i in range(int(16 / step) + 1):
        x = -8 + i * step
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        pdf = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        total += x * n * pdf * cdf ** (n - 1) * step
    return total


def slowest_factor(num_gpus: int, spread: float = GPU_SPREAD) -> float:
    """How much slower than a typical GPU the slowest of `num_gpus` runs, on average (module doc)."""
    if not 0 <= spread < 0.5:
        raise ValueError(f"GPU speed spread {spread}: give a share of the mean in [0, 0.5), e.g. 0.01")
    return 1 + spread * expected_max_normal(max(1, int(num_gpus)))
