"""Write a run in nccl-tests' own text layout (the 2.13+ one: `size count type redop root time algbw busbw
#wrong`, out of place then in place), for every binary `nccl/logs.py` reads.

Field widths are nccl-tests' (src/common.cu: `%12li  %12li  %8s  %6s  %6i`, then per placement
`%7s  %6.2f  %6.2f  %5s`). The time keeps 2 decimals while it fits 7 characters, then 1, then 0 (nccl-tests
2.17's getFloatStr in src/util.cu): never fewer digits than any nccl-tests version printed, so a parsed log
written again reads back equal. The header names the binary (`# Collective test starting: all_gather_perf`)
and, when the run knows it, the NCCL version (`nccl-library=21803`, the tests' version field saying
`fabriclab`); lines starting with `# fabriclab` say what made it: a prediction is never mistaken for a
measurement. Several runs written one after another make one multi-test log, as nccl-tests run in a row do.
Beyond MAX_RANK_LINES ranks the `# Using devices` block is one summary line and the first server's ranks.

Try it: `fabriclab simulate collective --cluster a100.json --gpus 32 --sizes 1KB:4GB --format nccl-tests`.
"""

from __future__ import annotations

import itertools

from fabriclab.nccl.logs import TEST_NAMES, NcclRow, NcclRun, version_code

_BINARY = {name: stem for stem, name in TEST_NAMES.items()}
# More ranks than this (the largest shipped real log has 16) are summarised in one line before the first
# server's ranks: nccl-tests prints a line per rank, which at 1,024 predicted GPUs is 1,024 invented lines.
# A log written so reads back as that first server only: a prediction, not a measurement to calibrate on.
MAX_RANK_LINES = 16
_TITLE = ("#                                                              out-of-place                       "
          "in-place          ")
_COLUMNS = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
            "algbw   busbw #wrong")
_UNITS = ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
          "(GB/s)  (GB/s)       ")


def _time(us: float) -> str:
    for decimals in (2, 1):
        text = f"{us:7.{decimals}f}"
        if len(text) <= 7:
            return text
    return f"{us:7.0f}"


def _row(row: NcclRow) -> str:
    line = f"{row.size_bytes:12d}  {row.count:12d}  {row.dtype:>8s}  {row.redop or 'none':>6s}  {row.root:6d}"
    line += f"  {_time(row.time_us)}  {row.algbw_GBps:6.2f}  {row.busbw_GBps:6.2f}  {row.error:>5s}"
    if row.inplace_time_us is not None:
        line += (f"  {_time(row.inplace_time_us)}  {row.inplace_algbw_GBps:6.2f}  {row.inplace_busbw_GBps:6.2f}"
                 f"  {row.inplace_error:>5s}")
    return line


def format_nccl_tests(run: NcclRun, *, notes: tuple[str, ...] = ()) -> str:
    """The text nccl-tests prints for `run`; every note becomes a `# fabriclab ...` line at the top."""
    if not run.rows:
        raise ValueError(f"{run.source}: no rows to print")
    if run.collective not in _BINARY:
        raise ValueError(f"{run.source}: nccl-tests has no binary for {run.collective!r}: use one of "
                         f"{', '.join(_BINARY)}")
    binary = f"{_BINARY[run.collective]}_perf"
    sizes = [r.size_bytes for r in run.rows]
    ratios = {b // a for a, b in itertools.pairwise(sizes) if a and b % a == 0}
    step = f"{ratios.pop()}(factor)" if len(ratios) == 1 else f"{sizes[1] - sizes[0] if len(sizes) > 1 else 0}(bytes)"
    checked = int(any(r.error != "N/A" for r in run.rows))
    lines = [f"# fabriclab {note}" for note in notes]
    if run.nccl_version:
        code = version_code(run.nccl_version)
        lines.append(f"# nccl-tests version fabriclab nccl-headers={code} nccl-library={code}")
    lines.append(f"# Collective test starting: {binary}")
    lines.append(f"# nThread 1 nGpus {run.gpus_per_process} minBytes {sizes[0]} maxBytes {sizes[-1]} step: {step} "
                 f"warmup iters: 0 iters: 0 agg iters: 1 validation: {checked} graph: 0")
    lines += ["#", "# Using devices"]
    shown = run.hosts
    if len(run.hosts) > MAX_RANK_LINES:  # a summary, then the first server's ranks (not 100,000 invented lines)
        first = run.hosts[0]
        shown = tuple(h for h in run.hosts if h == first)
        servers = run.servers
        lines.append(f"#  {len(run.hosts):,} ranks on {len(servers):,} servers ({servers[0]} to {servers[-1]}), "
                     f"{len(shown)} {run.device_name or 'GPU'} each; the first server's ranks:")
    for rank, host in enumerate(shown):
        local = rank - run.hosts.index(host)
        pid = 1000 + rank // run.gpus_per_process
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10s} device {local:2d} [0x00] "
                     f"{run.device_name or 'GPU'}")
    lines += ["#", _TITLE, _COLUMNS, _UNITS]
    lines += [_row(r) for r in run.rows]
    busbw = [r.busbw_GBps for r in run.rows] + [r.inplace_busbw_GBps for r in run.rows
                                                if r.inplace_busbw_GBps is not None]
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(busbw) / len(busbw):g} ", "#",
              f"# Collective test concluded: {binary}"]
    return "\n".join(lines) + "\n"
