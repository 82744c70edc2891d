"""tf_cnn_benchmarks' numbers and lines from per-step times (Samsi et al. ran tf_cnn_benchmarks).

As `benchmark_cnn.get_perf_timing` computes them, for the steps so far with global batch B and
per-step times t_i (here the slowest rank's): speed_i = B / t_i; the printed mean is B / mean(t_i),
the uncertainty std(speed_i) / sqrt(n), the jitter 1.4826 x the median absolute deviation of
speed_i (a robust standard deviation). `total images/sec` is B x steps / the sum of the step times.

Try it: `fabriclab train --model resnet50 --np 2 --image-size 32 --batch-size 4 --steps 10 --warmup 2`.
"""

from __future__ import annotations

import statistics

RULE = "-" * 64
HEADER = "Step\tImg/sec\ttotal_loss"
MAD_TO_STD = 1.4826  # median absolute deviation x 1.4826 estimates sigma of a normal distribution


def perf_timing(batch_size: int, times: list[float]) -> tuple[float, float, float]:
    """(mean images/sec, uncertainty, jitter) of the steps `times`."""
    speeds = [batch_size / t for t in times]
    mean = batch_size / statistics.fmean(times)
    uncertainty = statistics.pstdev(speeds) / len(speeds) ** 0.5
    median = statistics.median(speeds)
    jitter = MAD_TO_STD * statistics.median(abs(s - median) for s in speeds)
    return mean, uncertainty, jitter


def tf_cnn_lines(times: list[float], losses: list[float], batch_size: int, display_every: int) -> list[str]:
    """`Step  Img/sec  total_loss` lines at step 1 and every `display_every` steps, then the total."""
    lines = [HEADER]
    for step in range(1, len(times) + 1):
        if is_display_step(step, display_every):
            lines.append(step_line(times[:step], losses[step - 1], batch_size))
    lines += total_lines(times, batch_size)
    return lines


def is_display_step(step: int, display_every: int) -> bool:
    """tf_cnn_benchmarks prints step 1 and every `display_every`-th step (steps count from 1)."""
    return step == 1 or step % display_every == 0


def step_line(times: list[float], loss: float, batch_size: int) -> str:
    """The line of step `len(times)`: mean images/sec of the steps so far, uncertainty, jitter, loss."""
    mean, unc, jitter = perf_timing(batch_size, times)
    return f"{len(times)}\timages/sec: {mean:.1f} +/- {unc:.1f} (jitter = {jitter:.1f})\t{loss:.3f}"


def total_lines(times: list[float], batch_size: int) -> list[str]:
    """The closing lines: a rule, `total images/sec`, a rule."""
    return [RULE, f"total images/sec: {total_images_per_sec(times, batch_size):.2f}", RULE]


def total_images_per_sec(times: list[float], batch_size: int) -> float:
    return batch_size * len(times) / sum(times) if times else 0.0


def summarize(times: list[float], losses: list[float], stats: dict[str, float], batch_size: int,
              host: dict[str, float], params_agree: bool) -> dict:
    """One runtime's record: throughput, the per-step times, the trainer's per-iteration split
    (compute / communication / exposed communication / bytes sent, rank means; absent for DDP) and
    the host's network throughput and CPU utilisation over the timed steps."""
    mean, unc, jitter = perf_timing(batch_size, times)
    return {"images_per_sec": total_images_per_sec(times, batch_size), "mean_images_per_sec": mean,
            "uncertainty": unc, "jitter": jitter, "iteration_s": statistics.fmean(times),
            "step_s": times, "losses": losses, **stats, **host, "params_agree": params_agree}
