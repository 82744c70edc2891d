"""Profiles for a setup nobody measured: a measured profile rescaled, or one built from a layer table.

* `scaled_profile`: the same gradients, every time multiplied by `time_factor` (another GPU: the ratio
  of two data-sheet peak rates) and by `batch_size / profile.batch_size` (compute grows linearly with
  the batch, a first-order model that holds when the GPU is already busy at the measured batch).
* `flops_profile`: from a zoo layer table (`workload.zoo`) and a device rate in training FLOP/s
  (`training_flops_rate`: 3 x forward FLOPs x batch / iteration, calibrated on measured profiles). The
  iteration takes 3 x forward FLOPs x batch / rate, backward the measured profiles' share of it;
  backward walks the layers in reverse, each taking time in proportion to its forward FLOPs, and a
  layer's gradients are ready when it is done.

Try it: `python -c "from fabriclab.whatif.profiles import *; from fabriclab.workload.profile import load_profile as L; r=training_flops_rate([L('resnet50')]); print(flops_profile('inception_v3', r, 32, 0.5).summary())"`.
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.workload.profile import GradReady, Profile
from fabriclab.workload.zoo import layer_table

# Training FLOPs = forward + backward (grad of inputs and of weights: 2 x forward).
TRAIN_FLOPS_PER_FORWARD = 3.0


def scaled_profile(profile: Profile, *, time_factor: float = 1.0, batch_size: int | None = None,
                   device: str | None = None) -> Profile:
    """`profile` with every time x `time_factor` x (batch_size / its batch size)."""
    batch = profile.batch_size if batch_size is None else batch_size
    if time_factor <= 0 or batch < 1:
        raise ValueError(f"time factor {time_factor} and batch size {batch}: give a factor > 0 and a batch >= 1")
    k = time_factor * batch / profile.batch_size
    grads = tuple(replace(g, ready_s=g.ready_s * k) for g in profile.grads)
    return replace(profile, grads=grads, iteration_s=profile.iteration_s * k, batch_size=batch,
                   device=device or profile.device,
                   source=f"{profile.source} x {k:.4g} (time factor {time_factor:.4g}, batch {batch})")


def training_flops_rate(profiles: list[Profile]) -> float:
    """Mean training FLOP/s of measured profiles of zoo models (3 x forward FLOPs x batch / iteration)."""
    if not profiles:
        raise ValueError("give at least one measured profile to calibrate the FLOP rate on")
    rates = [TRAIN_FLOPS_PER_FORWARD * layer_table(p.model).forward_flops * p.batch_size / p.iteration_s
             for p in profiles]
    return sum(rates) / len(rates)


def backward_share(profiles: list[Profile]) -> float:
    """Mean share of the iteration that backward takes in measured profiles."""
    if not profiles:
        raise ValueError("give at least one measured profile")
    return sum(p.backward_s / p.iteration_s for p in profiles) / len(profiles)


def flops_profile(model: str, rate_flops: float, batch_size: int, backward_fraction: float,
                  *, device: str = "V100 (from FLOPs)") -> Profile:
    """A profile of zoo model `model` on a device running `rate_flops` training FLOP/s (module doc)."""
    if rate_flops <= 0 or batch_size < 1 or not 0 < backward_fraction <= 1:
        raise ValueError("FLOP rate > 0, batch >= 1 and a backward fraction in (0, 1] are needed")
    table = layer_table(model)
    iteration = TRAIN_FLOPS_PER_FORWARD * table.forward_flops * batch_size / rate_flops
    backward = iteration * backward_fraction
    total = sum(layer.forward_flops for layer in table.layers) or 1
    grads, t = [], 0.0
    for layer in reversed(table.layers):
        t += backward * layer.forward_flops / total
        if layer.param_bytes:
            grads.append(GradReady(name=layer.name, size_bytes=layer.param_bytes, ready_s=t))
    return Profile(model=model, device=device, batch_size=batch_size, iteration_s=iteration,
                   grads=tuple(grads), source=f"zoo layer table of {model} at {rate_flops / 1e12:.3g} TFLOP/s")


def profile_for_gpu(profile: Profile, gpu, precision: str = "fp32") -> Profile:
    """`profile` on GPU `gpu` (a `fabric.gpus.GpuSpec`): unchanged when it was measured on that GPU, else its
    times scaled by the ratio of the two GPUs' `precision` peaks (a roofline conversion, said in
    `extra["compute"]`); a ValueError when the profile's GPU is unknown, so nothing is mixed silently."""
    from fabriclab.fabric.gpus import gpu_for_name

    device = profile.device.split(" (")[0].strip()
    here = gpu_for_name(device)
    if here is not None and (here.name == gpu.name or gpu.name.upper().startswith(device.upper())):
        return profile
    if here is None:
        raise ValueError(f"profile {profile.model} was measured on {profile.device!r}, which fabriclab cannot match to "
                         f"the cluster's GPU {gpu.name}: profile the model on {gpu.name} (`fabriclab profile`) or "
                         f"give a cluster of the profile's GPU")
    factor = here.peak(precision) / gpu.peak(precision)
    base = profile.extra.get("compute") or f"measured profile of {device} ({shipped_name(profile.source)})"
    label = (f"{base}, converted to {gpu.name} by the {precision} peak ratio "
             f"{here.peak(precision) / 1e12:g} / {gpu.peak(precision) / 1e12:g} TFLOP/s (x {factor:.3g} the time: a "
             f"roofline conversion, not a measurement on {gpu.name})")
    scaled = scaled_profile(profile, time_factor=factor, device=gpu.name)
    return replace(scaled, extra={**profile.extra, "compute": label})


def compute_label(profile: Profile) -> str:
    """Where a profile's compute comes from: its `extra["compute"]` (a conversion, a FLOP-built profile), else
    `measured profile of <device> (<source>)`."""
    if profile.extra.get("compute"):
        return profile.extra["compute"]
    return f"measured profile of {profile.device or 'an unknown device'} ({shipped_name(profile.source)})"


def shipped_name(source: str) -> str:
    """A shipped profile's file as `fabriclab's workload/data/v100/resnet50.bk.log` (no install path)."""
    from pathlib import Path

    from fabriclab.workload.profile import DATA_DIR

    root = Path(DATA_DIR).resolve().parents[2]
    try:
        return f"fabriclab's {Path(source).resolve().relative_to(root).as_posix()}"
    except (ValueError, OSError):
        return source
