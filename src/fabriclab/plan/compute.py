"""Where a plan's compute comes from, and the server price that belongs to the same GPU.

A CNN plan replays a profile: one of the three measured V100 profiles (Zhang et al.'s ResNet-50,
ResNet-101 and VGG-16 backward logs), a profile file, or, for any other zoo model (`fabriclab models`),
a profile built from its layer table at the training FLOP rate the measured V100 profiles reach
(`whatif/profiles.py`: `flops_profile`, backward share as measured). Every row says which
(`compute_label`).

The price of the GPU servers must be of the same GPU as the compute: the shipped table's
`gpu_server_per_gpu` is an HGX H100 server's. `server_price` returns it only when the profile's GPU is
the priced GPU (`gpu` of the table entry, default H100); otherwise None, so the network's share and
the cost per images/s count the network alone, and `price_note` says why. A table may name its
server's GPU with `"gpu_server_per_gpu": {"usd": ..., "gpu": "V100", ...}`.

Try it: `fabriclab plan --model bert_base --gpus 64`.
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.whatif.profiles import compute_label
from fabriclab.workload.profile import V100_BATCH_S, Profile, load_profile

__all__ = ["compute_label", "plan_profile", "cluster_profiles", "price_note", "profile_gpu", "same_gpu"]

DEFAULT_ZOO_BATCH = 32
"""Samples per GPU of a zoo model's FLOP-built profile (the measured V100 profiles' batch)."""
PRICED_GPU = "H100"
"""GPU of the shipped table's server price (an HGX H100 server)."""


def plan_profile(name: str, *, iteration_s: float | None = None) -> Profile:
    """A measured V100 profile, a profile file, or a zoo model's FLOP-built profile (module doc)."""
    from pathlib import Path

    from fabriclab.workload.zoo import list_models

    if name in V100_BATCH_S or Path(name).exists() or name not in list_models():
        return load_profile(name, iteration_s=iteration_s)
    from fabriclab.whatif.profiles import backward_share, flops_profile, training_flops_rate

    measured = [load_profile(m) for m in V100_BATCH_S]
    rate = training_flops_rate(measured)
    profile = flops_profile(name, rate, DEFAULT_ZOO_BATCH, backward_share(measured),
                            device="V100 (from FLOPs)")
    label = (f"V100 training FLOP rate of the measured V100 profiles ({rate / 1e12:.3g} TFLOP/s) on the zoo layer "
             f"table of {name}, batch {DEFAULT_ZOO_BATCH}")
    return replace(profile, extra={**profile.extra, "compute": label})


def profile_gpu(profile: Profile) -> str:
    """The GPU a profile's times are of: `V100` for the built-in and FLOP-built ones, else its device."""
    device = profile.device.strip()
    return device.split(" ")[0] if device else "unknown"


def cluster_profiles(profiles, cluster) -> tuple:
    """The profiles on the cluster's GPU (`profile_for_gpu`: converted by the peak ratio when measured on
    another GPU, and labelled so)."""
    from fabriclab.fabric.cluster import cluster_gpu
    from fabriclab.whatif.profiles import profile_for_gpu

    gpu = cluster_gpu(cluster)
    return tuple(profile_for_gpu(p, gpu) for p in profiles)


def server_gpu(table) -> str:
    """The GPU the price table's server price is of."""
    return getattr(table, "server_gpu", "") or PRICED_GPU


def same_gpu(a: str, b: str) -> bool:
    """Whether two GPU names are the same part (case and packaging aside: H100 = H100-SXM5-80GB)."""
    a, b = a.upper(), b.upper()
    return a.startswith(b) or b.startswith(a)


def price_note(profiles, table) -> str | None:
    """Why the server price is left out, or None when it applies to every profile's GPU."""
    if table.gpu_server_per_gpu is None:
        return None
    gpus = sorted({profile_gpu(p) for p in profiles})
    other = [g for g in gpus if not same_gpu(g, server_gpu(table))]
    if not other:
        return None
    return (f"server price left out: the price table's servers are {server_gpu(table)} and the compute is "
            f"{', '.join(other)}; network share and $/(img/s) count the network only (give a price for "
            f"{other[0]} servers with --prices FILE, \"gpu_server_per_gpu\": {{\"usd\": ..., \"gpu\": "
            f"\"{other[0]}\"}})")
