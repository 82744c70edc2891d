"""One rank of a validation run: calibrate this machine, then the collectives benchmark, size group by group.

`fabriclab validate emulated` starts this module on every emulated host (`run_in_cluster`), with the torchrun-style
environment, so `launch` joins that launch. Each rank first measures what the simulator needs besides
the network (all ranks at once, as in a collective, so the cores are shared as they will be):

* `one_way_s`: half the round trip of a 4-byte message between ranks 0 and 1 through the same path the
  executor takes (`batch_isend_irecv` on Gloo, then wait), the other ranks idle;
* `step_s`: one round of 4-byte messages to the next rank and from the previous one, every rank at once
  (the slowest rank's median): what one step of a collective costs beyond its bytes when all ranks
  compete for the cores (on 2 cores with 4 ranks, mostly waiting to be scheduled: milliseconds);
* `stream_s`: time of one `STREAM_BYTES` message to the next rank and from the previous one, every
  rank at once (the slowest rank, median of a few): the emulated links' goodput when all ranks stream
  and the 2 cores also carry the kernel's TCP, forwarding and shaping work;
* `gamma_s_per_byte`: time per byte of `dst.add_(src)` on segment-sized float32 buffers (the executor's
  reduction), and `copy_s_per_byte` of `dst.copy_(src)` (applying a received copy).

Then it runs `bench_rank` for every size group, each with its own number of iterations (few for big
sizes, many for small ones) and reports their median. Rank 0 writes rows and calibration as JSON to
the `--out` path.

Try it: `fabriclab emu run -- python -m fabriclab.bench.validate.rank --config cfg.json --out rows.json`
(after `fabriclab emu up ...`; `fabriclab validate emulated` writes the config and does all of this).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from fabriclab.bench.collectives.run import BenchConfig, bench_rank
from fabriclab.runtime.launch import LaunchConfig, RankContext, launch

PING_WARMUP, PING_ROUNDS = 20, 200
# 8 MiB per rank: 134 ms at 500 Mbit/s, long against the per-message time and the 128 KiB tbf bucket.
STREAM_BYTES, STREAM_ROUNDS = 8 << 20, 3
# Reductions timed on 4 MiB buffers (the executor's default segment): big enough to leave the caches,
# as the segments of a >= 1 MB collective do.
CALIBRATION_BYTES = 4 << 20
CALIBRATION_REPS = 15


def calibrate(ctx: RankContext) -> dict:
    """One-way small-message time between ranks 0 and 1, and the reduction and copy cost per byte."""
    out: dict = {}
    if ctx.world_size > 1:
        out["one_way_s"] = _ping(ctx)
        out["step_s"] = _neighbour_step(ctx)
        out["stream_s"], out["stream_bytes"] = _stream(ctx), STREAM_BYTES
    numel = CALIBRATION_BYTES // 4
    a, b = torch.rand(numel), torch.rand(numel)
    dist.barrier(ctx.group)
    adds, copies = [], []
    for _ in range(CALIBRATION_REPS):
        start = time.perf_counter()
        a.add_(b)
        adds.append(time.perf_counter() - start)
        start = time.perf_counter()
        a.copy_(b)
        copies.append(time.perf_counter() - start)
    mine = torch.tensor([statistics.median(adds), statistics.median(copies)], dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(every, mine, group=ctx.group)
    per_rank = torch.stack(every) / CALIBRATION_BYTES
    out["gamma_s_per_byte"] = float(per_rank[:, 0].median())
    out["copy_s_per_byte"] = float(per_rank[:, 1].median())
    return out


def _ping(ctx: RankContext) -> float:
    """Median half round trip of 4 bytes between ranks 0 and 1 (the others wait at the barrier)."""
    buf = torch.zeros(1)
    rtts = []
    dist.barrier(ctx.group)
    if ctx.rank in (0, 1):
        peer = 1 - ctx.rank
        for i in range(PING_WARMUP + PING_ROUNDS):
            start = time.perf_counter()
            if ctx.rank == 0:
                _p2p(dist.isend, buf, peer, ctx.group)
                _p2p(dist.irecv, buf, peer, ctx.group)
            else:
                _p2p(dist.irecv, buf, peer, ctx.group)
                _p2p(dist.isend, buf, peer, ctx.group)
            if i >= PING_WARMUP:
                rtts.append(time.perf_counter() - start)
    result = torch.tensor([statistics.median(rtts) / 2 if rtts else 0.0], dtype=torch.float64)
    dist.broadcast(result, src=0, group=ctx.group)
    return float(result.item())


def _neighbour_step(ctx: RankContext) -> float:
    """Median time of one round of 4-byte messages to rank+1 and from rank-1, all ranks at once."""
    out, into = torch.zeros(1), torch.zeros(1)
    nxt, prev = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    rounds = []
    dist.barrier(ctx.group)
    for i in range(PING_WARMUP + PING_ROUNDS):
        start = time.perf_counter()
        ops = [dist.P2POp(dist.isend, out, group=ctx.group, group_peer=nxt),
               dist.P2POp(dist.irecv, into, group=ctx.group, group_peer=prev)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        if i >= PING_WARMUP:
            rounds.append(time.perf_counter() - start)
    slowest = torch.tensor([statistics.median(rounds)], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=ctx.group)
    return float(slowest.item())


def _stream(ctx: RankContext) -> float:
    """Median over rounds of the slowest rank's time to send STREAM_BYTES to rank+1 (from rank-1)."""
    out, into = torch.zeros(STREAM_BYTES // 4), torch.empty(STREAM_BYTES // 4)
    nxt, prev = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    rounds = []
    for _ in range(STREAM_ROUNDS):
        dist.barrier(ctx.group)
        start = time.perf_counter()
        ops = [dist.P2POp(dist.irecv, into, group=ctx.group, group_peer=prev),
               dist.P2POp(dist.isend, out, group=ctx.group, group_peer=nxt)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        slowest = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=ctx.group)
        rounds.append(float(slowest.item()))
    return statistics.median(rounds)


def _p2p(op, buf: torch.Tensor, peer: int, group) -> None:
    for work in dist.batch_isend_irecv([dist.P2POp(op, buf, group=group, group_peer=peer)]):
        work.wait()


def validate_rank(ctx: RankContext, plan: dict) -> dict:
    """Calibrate, then benchmark every size group of `plan`; every rank returns the same rows.

    A group of n iterations is n runs of the benchmark with one iteration each (the first after the
    group's warm-up), and a row's `time_us` is the median of the n: other jobs on a shared machine
    only ever add time, and one descheduled iteration would move the mean by far more than the model's
    error. The mean, minimum and every time are kept in the row."""
    calibration = calibrate(ctx) if plan.get("calibrate", True) else {}
    rows = []
    for group in plan["groups"]:
        runs: dict[tuple[str, int], list[dict]] = {}
        for rep in range(group["iters"]):
            config = BenchConfig(algos=tuple(plan["algos"]), op="allreduce", sizes_bytes=tuple(group["sizes"]),
                                 dtype="float32", iters=1, warmup=group["warmup"] if rep == 0 else 0,
                                 num_ranks=ctx.world_size, timeout_s=plan["timeout_s"],
                                 segment_bytes=plan["segment_bytes"])
            for row in bench_rank(ctx, config):
                runs.setdefault((row["algo"], row["size_bytes"]), []).append(row)
        for got in runs.values():
            times = [r["time_us"] for r in got]
            first = {k: v for k, v in got[0].items() if k not in ("algbw_GBps", "busbw_GBps", "time_us_median")}
            rows.append(first | {"time_us": statistics.median(times), "time_us_mean": statistics.fmean(times),
                                  "time_us_min": min(times), "times_us": times, "iters": len(times),
                                  "num_wrong": max(r["num_wrong"] for r in got)})
    return {"rows": rows, "calibration": calibration, "world_size": ctx.world_size}


def rank_main(rank_fn, description: str, out_help: str, argv: list[str] | None = None) -> int:
    """The entry point of one rank of a validate command: read the JSON plan, run `rank_fn(ctx, plan)` on
    every rank (`--np` local ranks when not inside a launch), and let rank 0 write its result to `--out`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", type=Path, required=True, help="JSON plan written by fabriclab validate")
    parser.add_argument("--out", type=Path, required=True, help=out_help)
    parser.add_argument("--np", type=int, default=1, help="local ranks when not inside a launch")
    args = parser.parse_args(argv)
    plan = json.loads(args.config.read_text())
    outcome = launch(rank_fn, (plan,), config=LaunchConfig(num_ranks=args.np, timeout_s=plan["timeout_s"]))
    if outcome.is_reporter:
        args.out.write_text(json.dumps(outcome.results[min(outcome.results)]))
    return 0


def main(argv: list[str] | None = None) -> int:
    return rank_main(validate_rank, "One rank of `fabriclab validate`.", "where rank 0 writes rows and calibration",
                     argv)


if __name__ == "__main__":
    sys.exit(main())
