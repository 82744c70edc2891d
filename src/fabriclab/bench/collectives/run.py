"""Collective benchmark in the style of nccl-tests and the OSU micro-benchmarks.

For every size and algorithm (a schedule spec such as `ring`, or `native` for the backend's own collective):
build the schedule once, outside timing; fill the inputs; warm up; then time rounds of `iters` iterations,
each after a barrier, the algorithms taking turns iteration by iteration (fair under changing machine load;
the order rotates each iteration, so none always goes first). An iteration's time is the slowest rank's
(per-iteration times are gathered after each round, never inside it). After each round the median time of
every algorithm and its confidence interval decide (`bench.noise`): rounds repeat until the fastest is clear
of the others, or they are within `resolution` of each other, or more rounds look futile, or `max_iters`
or `max_time_s` is reached (without `max_iters`: one round).
Every rank sees the same gathered times, so all stop after the same round. The reported time is the mean
(nccl-tests' choice); the row also keeps the median, its interval, the minimum (on a shared machine other
jobs only ever add time) and the number of iterations. Every timed iteration is checked against the
expected result computed locally; `num_wrong` counts wrong elements (worst iteration, summed over ranks).

Inputs are small integers: rank r holds `(k + r) % 4` where `k` is a fixed pseudo-random key in 0..3 per
element (period 4099, a prime, so a block delivered to the wrong place does not match by accident), and
non-owned blocks of allgather and non-root buffers of broadcast hold the sentinel 7. Sums stay exact in
every dtype: at most 3 x ranks, exact in bfloat16 up to 85 ranks and in float16 up to 682.

All-to-all (and send/receive where offered) has no schedule: `native` times the backend's own call, out
of place, checked the same way (`bench.collectives.exchange`).

Bandwidths as in nccl-tests' PERFORMANCE.md, with S the buffer size in bytes (count x element size; for
reduce_scatter, allgather and alltoall the full buffer of all blocks), t the time and n the number of ranks:
    algbw = S / t
    busbw = algbw x 2(n-1)/n   allreduce
            algbw x (n-1)/n    reduce_scatter, allgather, alltoall
            algbw              reduce, broadcast
(the factors: `collectives.schedule.bus_bandwidth_factor`). busbw is comparable across rank counts and with
the link bandwidth. GB/s means 1e9 bytes per second.

Try it: `fabriclab collectives bench --algo ring,butterfly,native --np 4 --sizes 1KB:16MB`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
import torch.distributed as dist

# The config and its checks live without torch (the CLI checks its input before importing torch).
from fabriclab.bench.collectives.config import (COLUMNS, DTYPE_SIZES, NATIVE, NATIVE_ONLY, REDOPS, BenchConfig,
                                               config_dict)
from fabriclab.bench.collectives.exchange import NativeExchange, exchange_count, exchange_inputs
from fabriclab.bench.noise import Repeated, repeat
from fabriclab.collectives import registry
from fabriclab.collectives.schedule import (ALLREDUCE, BROADCAST, REDUCE, REDUCE_SCATTER, bus_bandwidth_factor,
                                            split_counts)
from fabriclab.runtime.executor import DTYPES, BufferPool, ScheduleExecutor, run_native
from fabriclab.runtime.launch import LaunchConfig, RankContext, launch
from fabriclab.units import format_size

__all__ = ["COLUMNS", "DTYPE_SIZES", "NATIVE", "REDOPS", "BenchConfig", "config_dict",
           "run_bench", "bench_rank"]
PERIOD = 4099
SENTINEL = 7


def run_bench(config: BenchConfig, *, on_row: Callable[[dict], None] | None = None,
              build: Callable | None = None, on_launch: Callable[[dict], None] | None = None,
              on_progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Run the benchmark on local ranks (or the launch found in the environment); one row per algo x size.

    `on_row(row)` is called in this process as each row completes (progress). `on_progress(message)` after
    every round of a size: `size_bytes`, `verdict` (`bench.noise.Verdict`), `elapsed_s`, `stop` (None while
    rounds go on). `build` replaces `registry.build_schedule` (same signature; tests use it to corrupt a
    schedule); it must be picklable. `on_launch(placement)` gets where the ranks ran (launcher, hosts,
    ranks, GPUs), for the record."""
    launch_config = LaunchConfig(num_ranks=config.num_ranks, device=config.device, backend=config.backend,
                                 timeout_s=config.timeout_s)

    def on_message(rank: int, message: dict) -> None:
        handler = on_progress if message.get("progress") else on_row
        if handler is not None:
            handler(message)

    outcome = launch(bench_rank, (config, build), config=launch_config, on_message=on_message)
    if on_launch is not None and outcome.placement is not None:
        on_launch(outcome.placement)
    return outcome.results[min(outcome.results)]


def bench_rank(ctx: RankContext, config: BenchConfig, build: Callable | None = None) -> list[dict]:
    """The benchmark on one rank; every rank returns the same rows and rank 0 reports them as it goes.

    Per size the algorithms take turns iteration by iteration, so a change in machine load (other jobs on
    the cores) hits them alike and their ratio stays meaningful; they share the input and output buffers."""
    build = build or registry.build_schedule
    dtype, n = DTYPES[config.dtype], ctx.world_size
    itemsize = torch.empty(0, dtype=dtype).element_size()
    pool = BufferPool()
    rows: dict[tuple[str, int], dict] = {}
    for size in config.sizes_bytes:
        count = exchange_count(config.op, size // itemsize, n)
        ctx.mark(f"{config.op} {format_size(size)}")
        runs = {algo: _runner(config, algo, count, build, ctx, pool) for algo in config.algos}
        init, expected, check = _inputs(config, count, dtype, ctx)
        buf = torch.empty_like(init)
        for run in runs.values():
            for _ in range(config.warmup):
                buf.copy_(init)
                run(buf)
        wrong = {algo: torch.zeros((), dtype=torch.int64, device=ctx.device) for algo in runs}
        measured = _repeat_size(config, size, runs, (init, expected, check, buf), wrong, ctx)
        for algo in runs:
            rows[algo, size] = _row(config, algo, count, itemsize, n, measured, wrong[algo], ctx)
            if ctx.rank == 0:
                ctx.report(rows[algo, size])
    return [rows[algo, size] for algo in config.algos for size in config.sizes_bytes]


def _repeat_size(config: BenchConfig, size: int, runs: dict, buffers: tuple, wrong: dict,
                 ctx: RankContext) -> Repeated:
    """Rounds of timed iterations of every algorithm at one size until `bench.noise` says stop.

    Each round's times are gathered (the slowest rank's per iteration) with every rank's elapsed seconds,
    so every rank gets the same numbers and makes the same decision."""
    init, expected, check, buf = buffers
    algos, done = list(runs), [0]
    start = time.perf_counter()

    def measure(count: int) -> tuple[dict[str, list[float]], float]:
        times: dict[str, list[float]] = {algo: [] for algo in algos}
        for i in range(done[0], done[0] + count):
            for algo in algos[i % len(algos):] + algos[:i % len(algos)]:
                run = runs[algo]
                buf.copy_(init)
                if isinstance(run, NativeExchange):
                    run.reset()
                _sync(ctx.device)
                dist.barrier(ctx.group)
                begin = time.perf_counter()
                out = run(buf)
                _sync(ctx.device)
                times[algo].append(time.perf_counter() - begin)
                wrong[algo] = torch.maximum(wrong[algo], (out[check] != expected[check]).sum())
        done[0] += count
        return _slowest(times, time.perf_counter() - start, ctx)

    def progress(verdict, elapsed_s: float, stop: str | None) -> None:
        if ctx.rank == 0:
            ctx.report({"progress": True, "size_bytes": size, "verdict": verdict, "elapsed_s": elapsed_s,
                        "stop": stop})

    return repeat(measure, cap=config.repeat_cap, rule=config.noise_rule, on_round=progress)


def _slowest(times: dict[str, list[float]], elapsed_s: float, ctx: RankContext) -> tuple[dict, float]:
    """Every iteration's slowest rank, and the longest elapsed time of any rank: the same on every rank."""
    local = torch.tensor([list(v) + [elapsed_s] for v in times.values()], dtype=torch.float64, device=ctx.device)
    gathered = [torch.empty_like(local) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, local, group=ctx.group)
    slowest = torch.stack(gathered).amax(0).tolist()
    return {algo: row[:-1] for algo, row in zip(times, slowest)}, slowest[0][-1]


def _runner(config: BenchConfig, algo: str, count: int, build, ctx: RankContext, pool: BufferPool):
    if config.op in NATIVE_ONLY:
        return NativeExchange(config.op, count, DTYPES[config.dtype], group=ctx.group, device=ctx.device,
                              sentinel=SENTINEL)
    if algo == NATIVE:
        return lambda t: run_native(config.op, t, group=ctx.group, redop=config.redop, root=config.root,
                                    pool=pool)
    # Only rooted collectives take a root: build_schedule rotates the ranks by it, which for
    # reduce_scatter/allgather would move block ownership away from the split_counts layout.
    root = config.root if config.op in (REDUCE, BROADCAST) else 0
    schedule = build(config.op, algo, ctx.world_size, count, root)
    return ScheduleExecutor(schedule, group=ctx.group, redop=config.redop,
                            segment_bytes=config.segment_bytes, pool=pool).run


def _inputs(config: BenchConfig, count: int, dtype, ctx: RankContext):
    """(this rank's input, expected output, slice of the output the collective defines)."""
    n, rank, root, device = ctx.world_size, ctx.rank, config.root, ctx.device
    key = torch.randint(0, 4, (PERIOD,), generator=torch.Generator().manual_seed(PERIOD))
    values = torch.stack([(key + r) % 4 for r in range(n)])
    reduced = {"sum": values.sum(0), "max": values.amax(0), "min": values.amin(0)}[config.redop]

    def tile(period: torch.Tensor, start: int = 0, length: int = count) -> torch.Tensor:
        """Elements start..start+length of the periodic sequence `period`."""
        reps = -(-length // PERIOD)
        return period.roll(-(start % PERIOD)).to(dtype).repeat(reps)[:length].to(device)

    if config.op in NATIVE_ONLY:
        init, expected = exchange_inputs(config.op, count, n, rank, tile, values)
        return init, expected, slice(0, count)
    counts = split_counts(count, n)
    lo = sum(counts[:rank])
    mine = slice(lo, lo + counts[rank])
    everything = slice(0, count)
    if config.op == ALLREDUCE:
        return tile(values[rank]), tile(reduced), everything
    if config.op == REDUCE:
        return tile(values[rank]), tile(reduced), everything if rank == root else slice(0, 0)
    if config.op == REDUCE_SCATTER:
        return tile(values[rank]), tile(reduced), mine
    if config.op == BROADCAST:
        init = tile(values[root]) if rank == root else torch.full((count,), SENTINEL, dtype=dtype, device=device)
        return init, tile(values[root]), everything
    expected = torch.empty(count, dtype=dtype, device=device)
    pos = 0
    for r, c in enumerate(counts):
        expected[pos:pos + c] = tile(values[r], pos, c)
        pos += c
    init = torch.full((count,), SENTINEL, dtype=dtype, device=device)
    init[mine] = expected[mine]
    return init, expected, everything


def _row(config: BenchConfig, algo: str, count: int, itemsize: int, n: int, measured: Repeated,
         wrong: torch.Tensor, ctx: RankContext) -> dict[str, Any]:
    dist.all_reduce(wrong, group=ctx.group)
    per_iter = measured.samples[algo]  # the slowest rank's time of every iteration
    spread = measured.spreads[algo]
    time_s = statistics.fmean(per_iter)
    size = count * itemsize
    algbw = size / time_s / 1e9 if time_s > 0 else 0.0
    rooted = config.op in (REDUCE, BROADCAST)
    reduces = config.op in (ALLREDUCE, REDUCE, REDUCE_SCATTER)
    return {"algo": algo, "op": config.op, "size_bytes": size, "count": count, "dtype": config.dtype,
            "redop": config.redop if reduces else "none",
            "root": config.root if rooted else -1, "time_us": time_s * 1e6,
            "time_us_median": spread.median * 1e6, "time_us_min": min(per_iter) * 1e6,
            "time_us_ci_low": spread.low * 1e6, "time_us_ci_high": spread.high * 1e6,
            "time_ci_coverage": spread.coverage, "algbw_GBps": algbw,
            "busbw_GBps": algbw * bus_bandwidth_factor(config.op, n), "num_wrong": int(wrong.item()),
            "num_ranks": n, "iters": len(per_iter), "warmup": config.warmup, "stop": measured.stop,
            "elapsed_s": measured.elapsed_s}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)

