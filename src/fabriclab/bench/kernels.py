"""Measure a kernel table on this machine's GPU: transformer-shaped GEMMs (bf16, and fp8 where the GPU has
it), causal flash attention forward and forward + backward, and a large copy; the rows `fabriclab calibrate
kernels` fits the kernel model to (`fabric/kernel_fit.py`, the format of `fabric/data/kernels-h200.csv`).

Each kernel is timed with CUDA events (on a CPU: the wall clock) as the mean of `repeats` back-to-back calls
after `warmup` calls. GEMM shapes are M in 2,048-16,384 and N, K in 512-28,672 (the widths of today's
layers, per GPU after TP), in a seeded random order so that a time budget cuts a sample of the whole
range, not its first rows. `quick` measures a handful of small shapes (for a CPU, and the tests).

Try it: `fabriclab profile kernels --out kernels.csv` (on a machine with a GPU).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable

GEMM_M = (2048, 4096, 8192, 16384)
GEMM_NK = (512, 1024, 2048, 4096, 8192, 16384, 28672)
MAX_GEMM_ELEMENTS = 16384 * 16384 * 28672 // 2  # larger products take seconds each and add nothing
ATTENTION = tuple(itertools.product((1, 2), (8, 16, 32, 64), (1024, 2048, 4096, 8192)))  # batch, heads, seq
COPY_BYTES = (1 << 20, 16 << 20, 256 << 20, 2 << 30)
QUICK_GEMMS = ((64, 64, 64), (128, 64, 256), (256, 128, 128), (128, 256, 64), (64, 128, 512), (256, 256, 256),
               (512, 128, 64), (128, 512, 128))
COLUMNS = ("gpu", "op", "dtype", "M", "N", "K", "seconds", "tflops", "note")


def _timer(dev, repeats: int, warmup: int) -> Callable[[Callable[[], object]], float]:
    """Mean seconds of `repeats` back-to-back calls after `warmup`, on the profiler's clock (CUDA events on
    a GPU, the host clock on a CPU: `workload/profiler_hooks.Clock`)."""
    from fabriclab.workload.profiler_hooks import Clock

    clock = Clock(dev)

    def timed(fn) -> float:
        for _ in range(warmup):
            fn()
        clock.sync()
        clock.rewind()
        begin = clock.mark()
        for _ in range(repeats):
            fn()
        end = clock.mark()
        clock.sync()
        return clock.seconds(begin, end) / repeats
    return timed


def measure_kernels(device: str = "cuda", *, budget_s: float = 120.0, repeats: int = 20, warmup: int = 5,
                    quick: bool = False, progress: Callable[[str], None] | None = None) -> list[dict]:
    """The kernel table's rows (module doc); `progress(text)` hears each phase."""
    import torch

    from fabriclab.workload.profiler import resolve_device

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("no CUDA GPU here: run `profile kernels` on the GPU to measure, or --device cpu --quick "
                         "to try the harness")
    dev = resolve_device(device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    timed = _timer(dev, repeats, warmup)
    rows: list[dict] = []
    shapes = list(QUICK_GEMMS) if quick else [s for s in itertools.product(GEMM_M, GEMM_NK, GEMM_NK)
                                               if s[0] * s[1] * s[2] <= MAX_GEMM_ELEMENTS]
    random.Random(0).shuffle(shapes)
    # PyTorch has no public FP8 GEMM before `scaled_mm`: its private `_scaled_mm` (2.1 on) is used where it
    # exists and works, and a torch whose one does not is measured in bf16 alone, said in the progress line
    fp8 = dev.type == "cuda" and hasattr(torch, "_scaled_mm") and torch.cuda.get_device_capability(dev) >= (8, 9)
    dtype = torch.bfloat16
    start = time.perf_counter()
    if progress:
        progress(f"{len(shapes)} GEMM shapes on {name} ({'bf16 and fp8' if fp8 else 'bf16'}), "
                 f"at most {budget_s:g} s")
    for m, n, k in shapes:
        if time.perf_counter() - start > budget_s:
            break
        a = torch.randn(m, k, device=dev, dtype=dtype)
        b = torch.randn(k, n, device=dev, dtype=dtype)
        t = timed(lambda: a @ b)
        rows.append(_row(name, "gemm", "bf16", m, n, k, t, 2 * m * n * k / t / 1e12))
        if fp8:
            a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=dev, dtype=torch.float32)
            try:
                t = timed(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=dtype))
            except (TypeError, RuntimeError) as exc:  # another torch's private signature
                fp8 = False
                if progress:
                    progress(f"fp8 GEMMs left out: this torch's _scaled_mm refused them ({str(exc)[:80]})")
                continue
            rows.append(_row(name, "gemm", "fp8", m, n, k, t, 2 * m * n * k / t / 1e12))
        del a, b
    rows += _attention(torch, dev, name, timed, quick, progress)
    for nbytes in ((1 << 16, 1 << 20) if quick else COPY_BYTES):
        x = torch.empty(nbytes // 2, device=dev, dtype=dtype)
        y = torch.empty_like(x)
        t = timed(lambda: y.copy_(x))
        rows.append(_row(name, "copy", "bf16", nbytes, 0, 0, t, float("nan"),
                         f"GB/s read+write={2 * nbytes / t / 1e9:.0f}"))
    return rows


def _attention(torch, dev, name: str, timed, quick: bool, progress) -> list[dict]:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out = []
    cases = ((1, 2, 64), (1, 4, 128)) if quick else ATTENTION
    if progress:
        progress(f"{len(cases)} causal attention shapes (forward, forward + backward)")
    d = 128 if not quick else 32
    for batch, heads, seq in cases:
        q = torch.randn(batch, heads, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k, v = torch.randn_like(q, requires_grad=True), torch.randn_like(q, requires_grad=True)
        g = torch.randn_like(q)
        forward = timed(lambda: sdpa(q, k, v, is_causal=True))

        def both():
            sdpa(q, k, v, is_causal=True).backward(g)
        both_s = timed(both)
        flops = 4 * batch * heads * seq * seq * d / 2  # causal: half the scores
        out.append(_row(name, "sdpa_causal_fwd", "bf16", batch, heads, seq, forward, flops / forward / 1e12,
                        f"d={d}"))
        out.append(_row(name, "sdpa_causal_fwd_bwd", "bf16", batch, heads, seq, both_s,
                        3.5 * flops / both_s / 1e12, f"d={d}; bwd counted 2.5x fwd"))
    return out


def _row(gpu: str, op: str, dtype: str, m: int, n: int, k: int, seconds: float, tflops: float,
         note: str = "") -> dict:
    return {"gpu": gpu, "op": op, "dtype": dtype, "M": m, "N": n, "K": k, "seconds": seconds, "tflops": tflops,
            "note": note}


def write_table(rows: list[dict], path) -> None:
    """The rows as the kernel table's CSV."""
    import csv

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in COLUMNS})
