"""tf_cnn_benchmarks' numbers and lines from per-step times (seed 000 ran tf_cnn_benchmarks).

As `benchmark_cnn.get_perf_timing` computes them, for the steps so far with global batch B and
per-step times t_i (here the slowest rank's): speed_i = B / t_i; the printed mean is B / mean(t_i),
the uncertainty std(speed_i) / sqrt(n), the jitter 1.4826 x the median absolute deviation of
speed_i (a robust standard deviation). `total images/sec` is B x steps / the sum of the step times.

Try it: `fabriclab train --model resnet50 --np 2 --image-size 32 --batch-size 4 --steps 10 --warmup 2`.
"""

from __future__ import annotations

import statistics

RULE = "-" * 64
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
    lines = ["Step\tImg/sec\ttotal_loss"]
    for step in range(1, len(times) + 1):
        if step == 1 or step % display_every == 0:
            mean, unc, jitter = perf_timing(batch_size, times[:step])
            lines.append(f"{step}\timages/sec: {mean:.1f} +/- {unc:.1f} (jitter = {jitter:.1f})\t{losses[step - 1]:.3f}")
    lines += [RULE, f"total images/sec: {total_images_per_sec(times, batch_size):.2f}", RULE]
    return lines


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
