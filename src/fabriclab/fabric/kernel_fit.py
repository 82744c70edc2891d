"""Fit the kernel model (`fabric/kernels.py`) to a measured kernel table: `fabriclab calibrate kernels`.

A kernel table is CSV with the columns `gpu,op,dtype,M,N,K,seconds` (more are ignored): `gemm` rows in
`bf16` and `fp8` (a M x K times K x N), `sdpa_causal_fwd` and `sdpa_causal_fwd_bwd` rows (M = batch,
N = heads, K = sequence, head dim 128 unless the note says `d=`), `copy` rows (M = bytes copied). The H200
table in `fabric/data/kernels-h200.csv` is one (measured with CUDA events, the mean of 20 calls after 5
warm-up calls; `docs/measurements/` holds an H100 one made the same way).

A table is one GPU's: the fit runs against the peak and memory rate of the GPU its `gpu` column names
(`table_gpu`: the cluster's, or another of its generation; a row faster than that GPU can run is refused,
as is a time outside 0.1 us to 1 h or a size below 1).

The fit minimises the spread of log(model / measured) time: GEMMs per precision over (share, k0, latency)
on a grid, coarse then fine; attention's shares with that latency; the copy share from the largest copy.
The model's error is the rms of that spread over the kernels of >= 1e11 FLOPs (a step's are that large;
smaller ones are launch-bound and their mean time in a loop is the launch rate of the host).

Try it: `fabriclab calibrate kernels --table src/fabriclab/fabric/data/kernels-h200.csv`.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

from fabriclab.fabric.gpus import GpuSpec
from fabriclab.fabric.kernels import Attention, Gemm, KernelModel, wave_share

LARGE_FLOPS = 1e11
FIT_FLOPS = 1e10  # GEMMs below this are launch-bound in a timing loop: left out of the fit
SMALL_TILE_SHARES = (0.8, 0.85, 0.9, 0.93, 0.96, 1.0)
MAX_TABLE_BYTES = 16 << 20


# A kernel's measured time lies between a launch (~2 us on a GPU; 0.1 us leaves room for any host) and an
# hour: a time outside is a unit slip (ms or us for s) or a broken timer, and would set the fit alone.
KERNEL_SECONDS = (1e-7, 3600.0)
# Sizes of the ops whose time the fit reads; their M, N, K (attention: batch, heads, sequence) are >= 1.
SIZED_OPS = ("gemm", "sdpa_causal_fwd", "sdpa_causal_fwd_bwd")
MIN_ATTENTION_ROWS = 3  # large attention rows a share is fitted from (fewer: refused; none: the default)


@dataclass(frozen=True)
class KernelRow:
    """One measured kernel of a kernel table."""

    op: str
    """gemm, sdpa_causal_fwd, sdpa_causal_fwd_bwd or copy (others are read and not fitted)."""
    dtype: str
    """The math's precision: bf16, fp8, fp16, tf32."""
    m: int
    """GEMM: rows of A; attention: batch; copy: bytes copied."""
    n: int
    """GEMM: columns of B; attention: heads."""
    k: int
    """GEMM: the inner dimension; attention: sequence length."""
    seconds: float
    """Its measured time."""
    head_dim: int = 128
    """Attention's head dimension (`d=` in the note)."""
    gpu: str = ""
    """The `gpu` column: the GPU it was measured on, as the driver names it ("" without the column)."""
    where: str = ""
    """The file and line it was read from, for messages (`kernel table kernels.csv, line 12`)."""


def shipped_table() -> Path:
    """The H200 kernel table fabriclab ships (the Hopper defaults' measurement)."""
    return Path(str(resources.files("fabriclab.fabric") / "data" / "kernels-h200.csv"))


def read_kernel_table(path: Path | str) -> list[KernelRow]:
    """The rows of a kernel table; a ValueError names the file, line and field that is wrong."""
    from fabriclab.textfile import read_text

    path = Path(path)
    try:
        if path.stat().st_size > MAX_TABLE_BYTES:
            raise ValueError(f"kernel table {path} is over {MAX_TABLE_BYTES >> 20} MiB: give the CSV of "
                             f"kernel timings (gpu,op,dtype,M,N,K,seconds)")
        text = read_text(path, "kernel table")
    except OSError as exc:
        raise ValueError(f"cannot read kernel table {path}: {exc.strerror or exc}") from None
    reader = csv.DictReader(text.splitlines())
    need = {"op", "dtype", "M", "N", "K", "seconds"}
    if not reader.fieldnames or not need <= set(reader.fieldnames):
        raise ValueError(f"kernel table {path}: needs the columns {', '.join(sorted(need))} (as "
                         f"fabric/data/kernels-h200.csv has them)")
    rows: list[KernelRow] = []
    for line, r in enumerate(reader, start=2):
        row = _kernel_row(r, f"kernel table {path}, line {line}")
        if row is None:
            continue  # a kernel the GPU could not run (the table notes why)
        if rows and row.gpu != rows[0].gpu:
            raise ValueError(f"{row.where}: gpu {row.gpu!r}, where {rows[0].where.rsplit(', ', 1)[1]} says "
                             f"{rows[0].gpu!r}: a kernel table holds one GPU's kernels; split it")
        rows.append(row)
    return rows


def _kernel_row(r: dict, where: str) -> KernelRow | None:
    """One CSV row as a KernelRow (None: no time, NaN); a ValueError naming `where` and the field."""
    try:
        seconds = float(r["seconds"])
        m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
    except (TypeError, ValueError):
        raise ValueError(f"{where}: M, N, K must be whole numbers and seconds a number") from None
    if math.isnan(seconds):
        return None
    low, high = KERNEL_SECONDS
    if not low <= seconds <= high:
        raise ValueError(f"{where}: seconds {r['seconds']}: a kernel takes from {low * 1e6:g} us to "
                         f"{high / 3600:g} h; give its measured time in seconds")
    op = (r["op"] or "").strip()
    sizes = (("M", m), ("N", n), ("K", k)) if op in SIZED_OPS else (("M", m),) if op == "copy" else ()
    for name, value in sizes:
        if value < 1:
            raise ValueError(f"{where}: {name} {value}: a {op} row's "
                             f"{'M (bytes copied)' if op == 'copy' else 'M, N and K'} must be >= 1")
    if min(m, n, k) < 0:
        raise ValueError(f"{where}: M, N and K must be >= 0")
    note = r.get("note") or ""
    try:
        d = int(note.split("d=")[1].split(";")[0]) if "d=" in note else 128
    except ValueError:
        raise ValueError(f"{where}: note {note!r}: d= gives the head dimension as a whole number") from None
    return KernelRow(op, r["dtype"], m, n, k, seconds, d, gpu=(r.get("gpu") or "").strip(), where=where)


def table_gpu(rows: list[KernelRow], cluster_gpu: GpuSpec) -> GpuSpec:
    """The GPU a table is fitted for: the one its `gpu` column names (the times ran against its peak and
    memory rate), the cluster's when the column is absent or names it. A fit's shares of peak carry to
    another GPU of the generation (the H200 fit times the H100's kernels: tests/fabric/test_kernels.py), not
    further: a ValueError names both GPUs when the table's is unknown or of another generation."""
    from fabriclab.fabric.gpus import gpu_for_name, same_gpu

    name = next((r.gpu for r in rows if r.gpu), "")
    if not name or same_gpu(name, cluster_gpu.name):
        return cluster_gpu
    table = rows[0].where.split(", line ")[0] or "the kernel table"
    measured = gpu_for_name(name)
    if measured is None:
        raise ValueError(f"{table} was measured on {name!r}, which fabriclab does not know, and the cluster's GPU "
                         f"is {cluster_gpu.name}: give a table measured on {cluster_gpu.name}, or a --cluster whose "
                         f"`compute.gpu` is named {name!r}")
    if not measured.generation or measured.generation != cluster_gpu.generation:
        raise ValueError(f"{table} was measured on {name} ({measured.generation}), the cluster's GPU is "
                         f"{cluster_gpu.name} ({cluster_gpu.generation or 'generation unknown'}): a kernel fit "
                         f"carries only within a generation; give a --cluster whose GPU is {measured.name}, or a "
                         f"table measured on a {cluster_gpu.generation or cluster_gpu.name} GPU")
    return measured


def check_rows(rows: list[KernelRow], gpu: GpuSpec) -> None:
    """A ValueError naming the first row that ran faster than `gpu` can (above its peak, or a copy above its
    memory rate): a wrong size, unit or GPU, which the fit would have clamped to a share of 1 unseen."""
    for r in rows:
        if r.op == "gemm" and r.dtype in gpu.peak_flops:
            rate, peak, what = 2 * r.m * r.n * r.k / r.seconds, gpu.peak(r.dtype), f"{r.dtype} peak"
        elif r.op == "sdpa_causal_fwd" and "bf16" in gpu.peak_flops:
            rate, peak, what = _attention(r, False).flops / r.seconds, gpu.peak("bf16"), "bf16 peak"
        elif r.op == "copy":
            rate, peak, what = 2 * r.m / r.seconds, gpu.memory_bandwidth_Bps, "memory rate"
        else:
            continue
        if rate > peak:
            unit, scale = ("GB/s", 1e9) if r.op == "copy" else ("TFLOP/s", 1e12)
            raise ValueError(f"{r.where or 'kernel table'}: {r.op} {r.m}x{r.n}x{r.k} in {r.seconds:g} s runs at "
                             f"{rate / scale:,.0f} {unit}, above the {gpu.name}'s {what} of {peak / scale:,.0f} "
                             f"{unit}: check its sizes and seconds, and that the table's GPU is this one")


def _gemm_grid(rows: list[KernelRow], gpu: GpuSpec, precision: str, latency: float | None,
               small: float | None = None):
    """(rms, share, k0, latency, small-tile share) minimising the log spread (module doc)."""
    if small is None:
        return min((_gemm_grid(rows, gpu, precision, latency, s) + (s,) for s in SMALL_TILE_SHARES),
                   key=lambda x: x[0])
    m = np.array([r.m for r in rows], float)
    n = np.array([r.n for r in rows], float)
    k = np.array([r.k for r in rows], float)
    t = np.array([r.seconds for r in rows])
    # per row: the time at share 1 and k0 0 without the latency, and the memory floor
    width = 1 if precision == "fp8" else 2
    waves = np.array([wave_share(r.m, r.n, gpu.num_sms, small) for r in rows])
    ideal = 2 * m * n * k / (gpu.peak(precision) * waves)
    floor = ((m * k + k * n) * width + m * n * 2) / gpu.memory_bandwidth_Bps

    def search(shares, k0s, lats):
        best = None
        for k0 in k0s:
            base = ideal * (k + k0) / k
            for lat in lats:
                pred = lat + np.maximum(base[None, :] / shares[:, None], floor[None, :])
                err = np.sqrt(np.mean(np.log(pred / t[None, :]) ** 2, axis=1))
                i = int(np.argmin(err))
                if best is None or err[i] < best[0]:
                    best = (float(err[i]), float(shares[i]), float(k0), float(lat))
        return best

    lats = [latency] if latency is not None else np.arange(0, 21e-6, 2e-6)
    _, s, k0, lat = search(np.linspace(0.40, 1.0, 31), np.arange(0, 1025, 64), lats)
    fine_lats = [latency] if latency is not None else np.arange(max(0, lat - 2e-6), lat + 2.01e-6, 0.5e-6)
    return search(np.arange(max(0.3, s - 0.03), min(1.0, s + 0.03) + 1e-9, 0.0025),
                  np.arange(max(0, k0 - 64), k0 + 65, 16), fine_lats)


def fit_kernel_table(rows: list[KernelRow], gpu: GpuSpec) -> KernelModel:
    """The kernel model of `gpu` fitted to `rows` (`kernel_spread` says how it times them)."""
    check_rows(rows, gpu)
    gemms = {p: [r for r in rows if r.op == "gemm" and r.dtype == p and 2 * r.m * r.n * r.k >= FIT_FLOPS]
             for p in ("bf16", "fp8", "fp16", "tf32")}
    if len(gemms["bf16"]) < 8:
        raise ValueError(f"the kernel table has {len(gemms['bf16'])} bf16 GEMM rows: a fit needs at least 8 "
                         f"shapes (measure them as fabric/data/kernels-h200.csv does)")
    _, share, k0, latency, small = _gemm_grid(gemms["bf16"], gpu, "bf16", None)
    shares, k0s = {"bf16": share}, {"bf16": k0}
    for p in ("fp8", "fp16", "tf32"):
        if len(gemms[p]) >= 8 and p in gpu.peak_flops:
            _, shares[p], k0s[p], _ = _gemm_grid(gemms[p], gpu, p, latency, small)
    fwd = [r for r in rows if r.op == "sdpa_causal_fwd"]
    both = {(r.m, r.n, r.k, r.head_dim): r.seconds for r in rows if r.op == "sdpa_causal_fwd_bwd"}
    copies = [r for r in rows if r.op == "copy" and r.m > 0]
    copy_share = (min(1.0, 2 * max(copies, key=lambda r: r.m).m / max(copies, key=lambda r: r.m).seconds
                      / gpu.memory_bandwidth_Bps) if copies else 0.9)
    draft = KernelModel(gemm_share=shares, gemm_k0=k0s, latency_s=latency, attention_share=1.0,
                        attention_backward_share=1.0, small_tile_share=small, copy_share=copy_share, source="",
                        error=0.0)
    a_fwd = _attention_share(draft, gpu, [(r, r.seconds) for r in fwd], backward=False)
    bwd = [(r, both[(r.m, r.n, r.k, r.head_dim)] - r.seconds) for r in fwd if (r.m, r.n, r.k, r.head_dim) in both]
    a_bwd = _attention_share(draft, gpu, [(r, t) for r, t in bwd if t > 0], backward=True)
    model = KernelModel(gemm_share=shares, gemm_k0=k0s, latency_s=latency, attention_share=a_fwd or 0.6,
                        attention_backward_share=a_bwd or 0.5, small_tile_share=small, copy_share=copy_share,
                        source="", error=0.0)
    large = [e for errs in kernel_spread(model, rows, gpu).values() for f, e in errs if f >= LARGE_FLOPS]
    error = float(np.sqrt(np.mean(np.square(large)))) if large else 0.15
    return replace(model, error=round(error, 4))


def _attention_share(model: KernelModel, gpu: GpuSpec, rows, backward: bool) -> float | None:
    big = [(r, t) for r, t in rows if _attention(r, backward).flops >= LARGE_FLOPS]
    if not big:
        return None
    if len(big) < MIN_ATTENTION_ROWS:
        raise ValueError(f"the kernel table has {len(big)} sdpa_causal_fwd{'_bwd' if backward else ''} row(s) of "
                         f">= {LARGE_FLOPS:.0e} FLOPs: the attention {'backward' if backward else 'forward'} share "
                         f"is fitted from at least {MIN_ATTENTION_ROWS} (or none, to keep the default); measure "
                         f"more shapes")
    best = None
    for share in (float(x) for x in np.linspace(0.2, 1.0, 321)):
        trial = KernelModel(gemm_share=model.gemm_share, gemm_k0=model.gemm_k0, latency_s=model.latency_s,
                            attention_share=share, attention_backward_share=share, copy_share=model.copy_share,
                            small_tile_share=model.small_tile_share, source="", error=0)
        err = float(np.mean([math.log(trial.attention_s(_attention(r, backward), gpu) / t) ** 2 for r, t in big]))
        if best is None or err < best[0]:
            best = (err, float(share))
    return round(best[1], 4)


def _attention(r: KernelRow, backward: bool) -> Attention:
    return Attention(r.m, r.n, r.k, r.k, r.head_dim, causal=True, backward=backward)


def kernel_spread(model: KernelModel, rows: list[KernelRow], gpu: GpuSpec) -> dict[str, list[tuple[float, float]]]:
    """Per kind of kernel: (FLOPs, log(model / measured)) of every row the model times."""
    out: dict[str, list] = {}
    for r in rows:
        if r.op == "gemm" and r.dtype in model.gemm_share and r.dtype in gpu.peak_flops:
            g = Gemm(r.m, r.n, r.k)
            out.setdefault(f"gemm {r.dtype}", []).append(
                (g.flops, math.log(model.gemm_s(g, gpu, r.dtype) / r.seconds)))
        elif r.op == "sdpa_causal_fwd":
            a = _attention(r, False)
            out.setdefault("attention fwd", []).append((a.flops, math.log(model.attention_s(a, gpu) / r.seconds)))
    return out


def spread_summary(spread: dict[str, list[tuple[float, float]]]) -> list[dict]:
    """Rows for a table: per kind, kernels, rms spread of all and of the large ones, median (bias)."""
    out = []
    for kind, errs in spread.items():
        large = [e for f, e in errs if f >= LARGE_FLOPS]
        out.append({"kernels": kind, "rows": len(errs),
                    "rms_all": float(np.sqrt(np.mean(np.square([e for _, e in errs])))),
                    "rms_large": float(np.sqrt(np.mean(np.square(large)))) if large else float("nan"),
                    "median_large": float(np.median(large)) if large else float("nan"), "large_rows": len(large)})
    return out


__all__ = ["KernelRow", "check_rows", "fit_kernel_table", "kernel_spread", "read_kernel_table",
           "shipped_table", "spread_summary", "table_gpu"]
