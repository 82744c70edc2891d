"""`fabriclab collectives bench`: time collective algorithms for real, next to the backend's own collective.

Spawns `--np` local ranks on a Gloo group (or joins a torchrun / Slurm / mpirun launch), runs every
algorithm of `--algo` at every size of `--sizes` and prints an nccl-tests style table: size, count, type,
redop, root, time, algbw, busbw (formulas in `fabriclab.bench.collectives.run`), the ratio of busbw to `native`
when it was measured, and #wrong, the elements that differ from the expected result. Each size's rows are
printed as soon as that size is measured (`--format plain`, the default in a pipe, looks like
nccl-tests' output). Each size is timed in rounds of `--iters` until the fastest algorithm's median time
is clear of the others' (`bench.noise`), or more rounds look futile, or `--max-iters` or `--max-time` is
reached (a live line on a terminal's stderr says how it goes); the conclusion then names per size the
winner and its margin, or "within noise" with the spread (`report/bench_verdict.py`). The conclusion goes
to stdout on a terminal and to stderr in a pipe, where stdout stays the table alone (`calibrate
nccl-tests` reads it). `--op alltoall` times the backend's own `all_to_all_single` (`--algo native`, its
only algorithm and the default there; busbw factor (n-1)/n as in nccl-tests), `--op sendrecv` a send to
rank+1 and a receive from rank-1 (busbw = algbw). Exits with 1 when any
result is wrong or a rank fails, 2 on bad input (checked before any rank starts: sizes must be whole
elements of `--dtype`; ranks and buffers must fit this machine).

Try it: `fabriclab collectives bench --algo ring,butterfly,native --np 4 --sizes 4B:256MB`.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from fabriclab.bench.collectives.config import BENCH_OPS, NATIVE, NATIVE_ONLY, BenchConfig, config_dict
from fabriclab.bench.limits import check_number
from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, print_error,
                                  split_list, terminal_width, user_errors)
from fabriclab.cli.stream import RowStream
from fabriclab.collectives.matching import DEFAULT_SEGMENT_BYTES
from fabriclab.report.bench_verdict import describe, verdict, verdict_records
from fabriclab.runtime.environment import LaunchError, detect_launch
from fabriclab.units import format_size, parse_size, parse_size_range

# The main job's default: a short sweep that finishes within a minute on 2 cores. Rounds of 10 until a
# winner is clear or more rounds look futile, at most 200 or 3 s a size (issue 47: 5 iterations named a
# different winner on each run); on a busy 2-core box a size takes 1 to 3 s.
DEFAULT_CONFIG = BenchConfig(algos=("ring", "butterfly", NATIVE), op="allreduce",
                             sizes_bytes=tuple(parse_size_range("1KB:16MB")), iters=10, warmup=2,
                             max_iters=200, max_time_s=3.0, num_ranks=4, timeout_s=60.0)
DEFAULT_ALGOS = "ring,butterfly,native"
HEADERS = ("algo", "size(B)", "count(elements)", "type", "redop", "root", "time(us)", "algbw(GB/s)",
           "busbw(GB/s)", "vs native", "#wrong")


def register(app: typer.Typer) -> None:
    """Add `bench` to the `collectives` sub-app."""
    app.command("bench")(bench)


@user_errors
def bench(
    algo: Annotated[Optional[str], typer.Option(help="Comma list of algorithm specs; 'native' is the backend's "
                                                     f"own collective (default {DEFAULT_ALGOS}; alltoall and "
                                                     "sendrecv: native, their only one).")] = None,
    num_ranks: Annotated[int, typer.Option("--np", help="Local ranks to spawn (a torchrun/Slurm/mpirun "
                                                          "launch brings its own).")] = 4,
    sizes: Annotated[str, typer.Option(help="Buffer sizes, whole elements of --dtype: 4B:256MB (x2 steps), "
                                            "1KB:16MB:x4 or 1KB,1MB.")]
    = "1KB:16MB",
    op: Annotated[str, typer.Option(help=f"{', '.join(BENCH_OPS)}.")] = "allreduce",
    root: Annotated[int, typer.Option(help="Root rank of reduce and broadcast.")] = 0,
    dtype: Annotated[str, typer.Option(help="float32, float16, bfloat16, int32 or int64.")] = "float32",
    redop: Annotated[str, typer.Option(help="sum, max or min.")] = "sum",
    iters: Annotated[int, typer.Option(help="Timed iterations per algorithm and size, per round.")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed iterations before them.")] = 5,
    max_iters: Annotated[int, typer.Option(help="Rounds repeat until the fastest is clear of the noise, up to "
                                                "this many iterations (= --iters: one round).")] = 200,
    max_time: Annotated[float, typer.Option(help="Most seconds of timing one size (rounds stop here or at "
                                                 "--max-iters).")] = 3.0,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a missing or stuck rank before "
                                                "failing with its name.")] = 60.0,
    segment: Annotated[str, typer.Option(help="Message size the executor cuts chunks into on CPU.")]
    = format_size(DEFAULT_SEGMENT_BYTES),
    device: Annotated[str, typer.Option(help="cpu or cuda (each rank on the GPU of its local rank).")] = "cpu",
    backend: Annotated[Optional[str], typer.Option(help="gloo, nccl or mpi (default: nccl on cuda, gloo on "
                                                        "cpu; gloo lets ranks share a GPU).")] = None,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Time collective algorithms and the backend's own collective, nccl-tests style."""
    out = Output(fmt, json_path, store)
    if algo is None:
        algo = NATIVE if op.strip() in NATIVE_ONLY else DEFAULT_ALGOS
    config = BenchConfig(algos=tuple(split_list(algo, "algorithm list")), op=op.strip(),
                         sizes_bytes=tuple(parse_size_range(sizes)), dtype=dtype.strip(),
                         redop=redop.strip(), root=root, iters=iters, warmup=warmup, max_iters=max_iters,
                         max_time_s=check_number(max_time, "--max-time", above=0), num_ranks=num_ranks,
                         timeout_s=check_number(timeout, "--timeout", above=0), segment_bytes=parse_size(segment),
                         device=device.strip(), backend=backend)
    raise typer.Exit(execute(config, out))


def run_default() -> int:
    """The main job on its built-in default (`DEFAULT_CONFIG`); returns the exit code."""
    return execute(DEFAULT_CONFIG, Output())


def execute(config: BenchConfig, out: Output | Path | None = None, *,
            conclusion_to_stdout: bool = False) -> int:
    """Run, print each size's rows as they come (in the reporting process only), write the record and
    print the conclusion (stdout on a terminal or when asked, else stderr); returns the exit code. `out`
    may also be a `--json` path (or None), for callers of the old form."""
    from fabriclab.bench.collectives.run import run_bench

    if not isinstance(out, Output):
        out = Output(None, out)
    launch = detect_launch()
    reporter = launch is None or launch.rank == 0
    num_ranks = launch.world_size if launch else config.num_ranks
    printer = _printer(out, config, num_ranks) if reporter else None
    live = LiveLine() if reporter else None
    pending: list[dict] = []

    def on_row(row: dict) -> None:
        pending.append(row)
        if printer is not None and len(pending) == len(config.algos):  # every algorithm of one size
            live.clear()
            add_native_ratio(pending)
            for done in pending:
                printer.row(_cells(done, NATIVE in config.algos))
            pending.clear()

    launched: dict = {}  # where the ranks ran, for the record
    try:
        rows = run_bench(config, on_row=on_row, on_launch=launched.update,
                         on_progress=live.progress if live else None)
    except LaunchError as exc:
        print_error(exc)
        return EXIT_FAILED
    finally:
        if live:
            live.clear()
    if not reporter:
        return EXIT_FAILED if any(r["num_wrong"] for r in rows) else 0
    add_native_ratio(rows)
    printer.finish()
    out.record("collectives.bench", config_dict(config) | {"launch": launched or None}, rows,
               top={"verdicts": verdict_records(rows, config.confidence)})
    _conclude(out, rows, config, conclusion_to_stdout)
    wrong = [r for r in rows if r["num_wrong"]]
    if wrong:
        print_error(f"{len(wrong)} of {len(rows)} results were wrong (#wrong > 0)")
        return EXIT_FAILED
    return 0


def _conclude(out: Output, rows: list[dict], config: BenchConfig, to_stdout: bool) -> None:
    """Print the conclusion: on stdout on a terminal (or when asked), else on stderr, so that a piped
    stdout stays the table alone; nothing for one algorithm (nothing to compare, and `emu run` logs of
    `--algo native`, stdout and stderr in one, stay readable by `calibrate nccl-tests`)."""
    if len(config.algos) < 2:
        return
    conclusion = "conclusion: " + "\n  ".join(verdict(rows, config.confidence))
    if to_stdout or out.fmt == "table":
        out.note(conclusion)
    else:
        print(conclusion, file=sys.stderr, flush=True)


class LiveLine:
    """One line on stderr, rewritten after every round of a size, on a terminal only (a pipe or a log gets
    the rows and the conclusion, which say as much)."""

    def __init__(self) -> None:
        self.shown = sys.stderr.isatty()
        self.width = (terminal_width(sys.stderr) or 80) - 1
        self.dirty = False

    def progress(self, message: dict) -> None:
        if not self.shown:
            return
        verdict = message["verdict"]
        text = (f"{format_size(message['size_bytes'])}: {verdict.num_samples} iterations, "
                f"{message['elapsed_s']:.1f} s")
        if len(text) + len(describe(verdict)) + 2 <= self.width:  # a wrapped line cannot be rewritten in place
            text += ", " + describe(verdict)
        sys.stderr.write("\r\033[K" + text)
        sys.stderr.flush()
        self.dirty = True

    def clear(self) -> None:
        if self.dirty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.dirty = False


def add_native_ratio(rows: list[dict]) -> None:
    """Set `busbw_vs_native` on every row whose size was also measured with `native`."""
    native = {r["size_bytes"]: r["busbw_GBps"] for r in rows if r["algo"] == NATIVE}
    for row in rows:
        base = native.get(row["size_bytes"])
        row["busbw_vs_native"] = row["busbw_GBps"] / base if base else None


def _printer(out: Output, config: BenchConfig, num_ranks: int) -> RowStream:
    # rounds of `iters` up to `max_iters` a size (or `max_time_s`: in the record); 80 columns for allreduce
    cap = config.repeat_cap.max_iters
    iters = f"{config.iters}" if cap == config.iters else f"{config.iters}-{cap}"
    title = (f"collectives bench: {config.op}, {num_ranks} ranks, {iters} iters +{config.warmup} warm-up; "
             f"GB/s = 1e9 B/s")
    headers = [h for h in HEADERS if h != "vs native" or NATIVE in config.algos]
    biggest = max(config.sizes_bytes)
    widths = {"algo": max(map(len, config.algos)), "size(B)": len(str(biggest)), "type": len(config.dtype),
              "redop": max(len(config.redop), len("none")), "time(us)": 9, "algbw(GB/s)": 8, "busbw(GB/s)": 8}
    return RowStream(out, title, headers, widths=widths, left=("algo", "type", "redop"),
                     constant=("type", "redop", "root"))


def _bandwidth(gbps: float) -> str:
    """GB/s as nccl-tests prints it (3 decimals), with 3 significant digits below 0.1 (`0.0000312`, never
    `0.000`)."""
    if gbps >= 0.1 or gbps <= 0:
        return f"{gbps:.3f}"
    return f"{gbps:.{2 - math.floor(math.log10(gbps))}f}"


def _cells(row: dict, with_ratio: bool) -> list:
    ratio = row.get("busbw_vs_native")
    cells = [Text(row["algo"]), str(row["size_bytes"]), str(row["count"]), row["dtype"], row["redop"],
             str(row["root"]), f"{row['time_us']:.1f}", _bandwidth(row["algbw_GBps"]), _bandwidth(row["busbw_GBps"])]
    if with_ratio:
        cells.append("-" if ratio is None else f"{ratio:.2f}")
    cells.append(Text(str(row["num_wrong"]), style="red" if row["num_wrong"] else "green"))
    return cells
