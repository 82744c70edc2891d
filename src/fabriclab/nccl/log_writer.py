"""Write a run in nccl-tests' own text layout (the 2.13+ one, with `root` and `#wrong` columns).

Field widths are nccl-tests' (`%12li %12li %8s %6s %6i`, then per placement `%7s %6.2f %6.2f %5s`, the
time with 2, 1 or 0 decimals below 100 us, below 10 ms and above), so the output lines up with real
logs and `nccl/logs.py` reads it back. Lines starting with `# fabriclab` say what made it: a
prediction is never mistaken for a measurement.

Try it: `fabriclab simulate collective --cluster a100.json --gpus 32 --sizes 1KB:4GB --format nccl-tests`.
"""

from __future__ import annotations

import itertools

from fabriclab.nccl.logs import NcclRow, NcclRun

_TEST_BINARY = {"allreduce": "all_reduce", "allgather": "all_gather", "reduce_scatter": "reduce_scatter",
                "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall"}
_TITLE = ("#                                                              out-of-place                       "
          "in-place          ")
_COLUMNS = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
            "algbw   busbw #wrong")
_UNITS = ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
          "(GB/s)  (GB/s)       ")


def _time(us: float) -> str:
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def _row(row: NcclRow) -> str:
    line = f"{row.size_bytes:12d}  {row.count:12d}  {row.dtype:>8s}  {row.redop:>6s}  {row.root:6d}"
    line += f"  {_time(row.time_us)}  {row.algbw_GBps:6.2f}  {row.busbw_GBps:6.2f}  {row.error:>5s}"
    if row.inplace_time_us is not None:
        line += (f"  {_time(row.inplace_time_us)}  {row.inplace_algbw_GBps:6.2f}  {row.inplace_busbw_GBps:6.2f}"
                 f"  {row.inplace_error:>5s}")
    return line


def format_nccl_tests(run: NcclRun, *, notes: tuple[str, ...] = ()) -> str:
    """The text nccl-tests prints for `run`; every note becomes a `# fabriclab ...` line at the top."""
    if not run.rows:
        raise ValueError(f"{run.source}: no rows to print")
    sizes = [r.size_bytes for r in run.rows]
    ratios = {b // a for a, b in itertools.pairwise(sizes) if a and b % a == 0}
    step = f"{ratios.pop()}(factor)" if len(ratios) == 1 else f"{sizes[1] - sizes[0] if len(sizes) > 1 else 0}(bytes)"
    lines = [f"# fabriclab {note}" for note in notes]
    lines.append(f"# Collective test starting: {_TEST_BINARY.get(run.collective, run.collective)}_perf")
    lines.append(f"# nThread 1 nGpus {run.gpus_per_process} minBytes {sizes[0]} maxBytes {sizes[-1]} step: {step} "
                 f"warmup iters: 0 iters: 0 agg iters: 1 validation: 0 graph: 0")
    lines += ["#", "# Using devices"]
    for rank, host in enumerate(run.hosts):
        local = rank - run.hosts.index(host)
        pid = 1000 + rank // run.gpus_per_process
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10s} device {local:2d} [0x00] "
                     f"{run.device_name or 'GPU'}")
    lines += ["#", _TITLE, _COLUMNS, _UNITS]
    lines += [_row(r) for r in run.rows]
    busbw = [r.busbw_GBps for r in run.rows] + [r.inplace_busbw_GBps for r in run.rows
                                                if r.inplace_busbw_GBps is not None]
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(busbw) / len(busbw):g} ", "#"]
    return "\n".join(lines) + "\n"
