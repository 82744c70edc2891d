"""Read nccl-tests output (`all_reduce_perf` and every other `*_perf`) and `fabriclab collectives bench` tables.

What a log gives: the collective, the ranks (one `#  Rank N ... on HOST device D` line each, so the
servers and GPUs per server), how many GPUs one process drove (`nThread T nGpus G`: T*G), and one row
per size with the out-of-place and in-place time, algbw and busbw. Both nccl-tests layouts are read:
the 2.x one (`size count type redop time algbw busbw error ...`) and the later one with `root` and
`#wrong` columns; columns are found by name in the header line, never by position. Lines may carry
mpirun's `[1,0]<stdout>:` or srun's `0: ` prefix; NCCL INFO/WARN lines and other chatter in between
are skipped. A file may hold several runs one after another (each starts at its `# nThread` line).

Errors name the file and line and say what to change: no table at all (garbage), a run cut off (a row
with missing fields, no `# Avg bus bandwidth` line at its end), rows of several processes or runs
interleaved (mixed), a busbw that is not the collective's algbw x factor.

`fabriclab collectives bench` output (plain, csv or rich table) becomes one run per algorithm; it
names no hosts, so one rank per host is assumed (the emulated clusters run one rank per namespace).

Try it: `python -m fabriclab.nccl.logs examples/nccl-tests-a100/nccl_16.log`.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fabriclab.collectives.schedule import bus_bandwidth_factor

# nccl-tests binary stem -> our collective name.
TEST_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter",
              "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall"}
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")


@dataclass(frozen=True, kw_only=True)
class NcclRow:
    """One size of a run: the out-of-place columns and, when measured, the in-place ones."""

    size_bytes: int
    """Buffer size (nccl-tests' `size`, bytes)."""
    count: int
    """Elements (nccl-tests' `count`)."""
    dtype: str = "float"
    """Element type as printed (`float`, `half`, `float32`, ...)."""
    redop: str = "sum"
    """Reduction (`sum`, ...; `none` where the collective has none)."""
    root: int = -1
    """Root rank of reduce and broadcast, -1 where none."""
    time_us: float
    """Out-of-place time per iteration, microseconds."""
    algbw_GBps: float
    """Out-of-place algbw = size / time, 1e9 bytes per second."""
    busbw_GBps: float
    """Out-of-place busbw = algbw x the collective's factor, 1e9 bytes per second."""
    error: str = "N/A"
    """Out-of-place check column as printed (`0`, `2e-07`, `N/A`)."""
    inplace_time_us: float | None = None
    """In-place time, microseconds; None when the log has no in-place columns."""
    inplace_algbw_GBps: float | None = None
    """In-place algbw, 1e9 bytes per second."""
    inplace_busbw_GBps: float | None = None
    """In-place busbw, 1e9 bytes per second."""
    inplace_error: str = "N/A"
    """In-place check column as printed."""


@dataclass(frozen=True, kw_only=True)
class NcclRun:
    """One nccl-tests run (or one algorithm of a `collectives bench` table)."""

    source: str
    """Where it came from: `file` or `file (run 2)`; errors and reports name it."""
    collective: str
    """allreduce, allgather, reduce_scatter, broadcast, reduce or alltoall."""
    hosts: tuple[str, ...]
    """Host name of every rank, in rank order."""
    gpus_per_process: int = 1
    """GPUs one process drove (nThread x nGpus): its kernel launches add up."""
    device_name: str = ""
    """GPU name of rank 0 as printed (`A100-SXM4-40GB`)."""
    label: str = ""
    """Algorithm of a `collectives bench` row set (`native`, `ring`); empty for nccl-tests."""
    layout_assumed: bool = False
    """True when the log named no hosts and one rank per host was assumed."""
    rows: tuple[NcclRow, ...] = field(default_factory=tuple)
    """One row per size, sizes increasing."""

    @property
    def num_ranks(self) -> int:
        """Ranks (GPUs) of the run."""
        return len(self.hosts)

    @property
    def servers(self) -> tuple[str, ...]:
        """Distinct hosts in order of first rank."""
        return tuple(dict.fromkeys(self.hosts))

    @property
    def num_servers(self) -> int:
        """Distinct hosts."""
        return len(self.servers)

    @property
    def gpus_per_server(self) -> int:
        """Ranks per host; a ValueError when hosts hold different numbers of ranks."""
        counts = {self.hosts.count(h) for h in self.servers}
        if len(counts) != 1:
            raise ValueError(f"{self.source}: hosts run different numbers of ranks "
                             f"({', '.join(f'{h}: {self.hosts.count(h)}' for h in self.servers)}); "
                             f"fabriclab models servers with equal GPU counts: use such a run")
        return counts.pop()


_PREFIX = re.compile(r"^(?:\[(\d+),(\d+)\]<(stdout|stderr)>:|(\d+): |\[(\d+)\] )")
_NTHREAD = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s*(.*)$")
_ROW_START = re.compile(r"^\d+\s+\d+(\s|$)")
_TEST = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_COLUMN_NAMES = {"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "error", "#wrong"}


class _Run:
    """A run being read: its header facts, then its rows."""

    def __init__(self, line_no: int, threads_gpus: tuple[int, int] | None):
        self.first_line = line_no
        self.threads_gpus = threads_gpus
        self.ranks: dict[int, tuple[str, str, str]] = {}
        self.columns: list[str] | None = None
        self.rows: list[NcclRow] = []
        self.row_prefix: str | None = None
        self.finished = False
        self.test: str | None = None


# nccl-tests' closing check of the results: `# Out of bounds values : 0 OK` (or `48 FAILED`).
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)")


def _where(source: str, line_no: int) -> str:
    return f"{source}, line {line_no}"


def parse_nccl_tests(text: str, source: str = "<text>") -> list[NcclRun]:
    """Every run in nccl-tests output `text`; a ValueError naming `source` and the line on bad input."""
    runs: list[_Run] = []
    current: _Run | None = None
    test_name: str | None = None
    for line_no, raw in enumerate(text.splitlines(), start=1):
        prefix_match = _PREFIX.match(raw)
        prefix = prefix_match.group(0) if prefix_match else ""
        line = raw[len(prefix):].strip()
        if not line:
            continue
        test = _TEST.search(line)
        if test:
            test_name = test.group(1)
        if line.startswith("#"):
            threads = _NTHREAD.search(line)
            if threads:
                if current is not None and not current.finished:
                    raise _truncated(source, current, line_no)
                current = _Run(line_no, (int(threads.group(1)), int(threads.group(2))))
                current.test, test_name = test_name, None
                runs.append(current)
                continue
            if current is None:
                continue
            rank = _RANK.match(line)
            if rank:
                current.ranks[int(rank.group(1))] = (rank.group(3), rank.group(2), rank.group(5).strip())
            elif _is_column_header(line):
                current.columns = line.lstrip("#").split()
            elif line.startswith("# Avg bus bandwidth"):
                current.finished = True
            elif (wrong := _OUT_OF_BOUNDS.match(line)) and wrong.group(2) != "OK":
                raise ValueError(f"{_where(source, line_no)}: {line!r}: nccl-tests found wrong results in the run "
                                 f"that starts at line {current.first_line}; its times are not to be trusted: "
                                 f"fix the run (or drop this log) before fitting or comparing it")
            continue
        if not line[0].isdigit() or "NCCL" in line or not _ROW_START.match(line):
            continue  # NCCL INFO/WARN lines (hosts may start with a digit), "NCCL version", launcher chatter
        if current is None or current.columns is None:
            raise ValueError(f"{_where(source, line_no)}: a table row before any nccl-tests header "
                             f"('# nThread ...' and the column names): pass the whole log")
        if current.finished:
            raise ValueError(f"{_where(source, line_no)}: a table row after the end of the run that starts "
                             f"at line {current.first_line}: the log mixes several outputs; split it")
        if current.row_prefix is not None and prefix.split(":")[0] != current.row_prefix:
            raise ValueError(f"{_where(source, line_no)}: rows from two processes ({current.row_prefix!r} and "
                             f"{prefix.split(':')[0]!r}) are interleaved: the log is mixed; keep one "
                             f"process's output (mpirun --output-filename, or rank 0 only)")
        current.row_prefix = prefix.split(":")[0]
        current.rows.append(_parse_row(line, current.columns, source, line_no))
    if not runs:
        raise ValueError(f"{source}: no nccl-tests output found (no '# nThread ... nGpus ...' header): "
                         f"give the output of an nccl-tests binary such as all_reduce_perf")
    if not runs[-1].finished:
        raise _truncated(source, runs[-1], None)
    many = len(runs) > 1
    return [_finish(run, f"{source} (run {i + 1})" if many else source) for i, run in enumerate(runs)]


def _is_column_header(line: str) -> bool:
    words = line.lstrip("#").split()
    return len(words) >= 6 and words[0] == "size" and set(words) <= _COLUMN_NAMES


def _truncated(source: str, run: _Run, line_no: int | None) -> ValueError:
    where = f"before line {line_no}" if line_no else "at the end of the file"
    got = f"{len(run.rows)} rows" if run.rows else "no rows"
    return ValueError(f"{source}: the run that starts at line {run.first_line} is cut off {where} ({got}, "
                      f"no '# Avg bus bandwidth' line): pass the complete output of the run")


def _parse_row(line: str, columns: list[str], source: str, line_no: int) -> NcclRow:
    words = line.split()
    if len(words) != len(columns):
        raise ValueError(f"{_where(source, line_no)}: expected {len(columns)} fields ({' '.join(columns)}), "
                         f"found {len(words)}: the line is cut off or not an nccl-tests row")
    first: dict[str, str] = {}
    second: dict[str, str] = {}
    for name, word in zip(columns, words):
        (second if name in first and name in ("time", "algbw", "busbw", "error", "#wrong") else first)[name] = word
    try:
        out = {"size_bytes": int(first["size"]), "count": int(first["count"]), "dtype": first.get("type", "float"),
                   "redop": first.get("redop", "none"), "root": int(first.get("root", -1)),
                   "time_us": float(first["time"]), "algbw_GBps": float(first["algbw"]),
                   "busbw_GBps": float(first["busbw"]), "error": first.get("error", first.get("#wrong", "N/A"))}
        if "time" in second:
            out.update(inplace_time_us=float(second["time"]), inplace_algbw_GBps=float(second["algbw"]),
                       inplace_busbw_GBps=float(second["busbw"]),
                       inplace_error=second.get("error", second.get("#wrong", "N/A")))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{_where(source, line_no)}: cannot read the row {line!r} ({exc}): it is not a "
                         f"complete nccl-tests row") from None
    if out["size_bytes"] < 0 or out["time_us"] < 0:
        raise ValueError(f"{_where(source, line_no)}: negative size or time in {line!r}")
    if not all(math.isfinite(v) for v in out.values() if isinstance(v, float)):
        raise ValueError(f"{_where(source, line_no)}: a time or bandwidth that is not a number in {line!r}: "
                         f"remove the row or rerun that size")
    return NcclRow(**out)


def _finish(run: _Run, source: str) -> NcclRun:
    if not run.ranks:
        raise ValueError(f"{source}: no '#  Rank N ... on HOST device D' lines after line {run.first_line}: "
                         f"keep nccl-tests' '# Using devices' block, it tells the servers and GPUs")
    missing = sorted(set(range(max(run.ranks) + 1)) - set(run.ranks))
    if missing:
        raise ValueError(f"{source}: the '# Using devices' block lists no rank {missing[0]}: "
                         f"pass the complete header of the run")
    if not run.rows:
        raise ValueError(f"{source}: the run at line {run.first_line} has a header but no rows")
    sizes = [r.size_bytes for r in run.rows]
    if any(b <= a for a, b in itertools.pairwise(sizes)):
        bad = next(i for i, (a, b) in enumerate(itertools.pairwise(sizes)) if b <= a)
        raise ValueError(f"{source}: size {sizes[bad + 1]} follows size {sizes[bad]}: rows of several runs "
                         f"are mixed; split the log into one file per run")
    hosts = tuple(run.ranks[r][0] for r in range(len(run.ranks)))
    threads, gpus = run.threads_gpus or (1, 1)
    collective = _collective(run, len(hosts), source)
    return NcclRun(source=source, collective=collective, hosts=hosts, gpus_per_process=threads * gpus,
                   device_name=run.ranks[0][2], rows=tuple(run.rows))


def _collective(run: _Run, num_ranks: int, source: str) -> str:
    """The collective from the test name, else from busbw/algbw and the columns; checked on every row."""
    if run.test:
        if run.test not in TEST_NAMES:
            raise ValueError(f"{source}: fabriclab models {', '.join(COLLECTIVES)}; this log is "
                             f"{run.test}_perf")
        name = TEST_NAMES[run.test]
    else:
        name = _infer_collective(run, num_ranks, source)
    if num_ranks > 1:
        factor = bus_bandwidth_factor(name, num_ranks)
        for row in run.rows:
            if row.algbw_GBps >= 1.0 and abs(row.busbw_GBps / row.algbw_GBps - factor) > 0.02 * factor + 0.01:
                raise ValueError(f"{source}: at size {row.size_bytes} busbw/algbw is "
                                 f"{row.busbw_GBps / row.algbw_GBps:.3f}, not {factor:.3f} as {name} on "
                                 f"{num_ranks} ranks gives: the rows and the '# Using devices' block do not "
                                 f"belong to one run")
    return name


def _infer_collective(run: _Run, num_ranks: int, source: str) -> str:
    """Old logs do not name the test: busbw/algbw tells the factor, the root and redop columns the rest."""
    has_root = any(r.root >= 0 for r in run.rows)
    reduces = any(r.redop.lower() not in ("none", "") for r in run.rows)
    rows = [r for r in run.rows if r.algbw_GBps >= 1.0]
    n = num_ranks
    if n == 1 or not rows:  # busbw carries no information: the columns decide
        if has_root:
            return "reduce" if reduces else "broadcast"
        return "allreduce" if reduces else "allgather"
    ratio = sorted(r.busbw_GBps / r.algbw_GBps for r in rows)[len(rows) // 2]
    if has_root and abs(ratio - 1.0) < 0.03:
        return "reduce" if reduces else "broadcast"
    if abs(ratio - 2 * (n - 1) / n) < 0.03:
        return "allreduce"
    if abs(ratio - (n - 1) / n) < 0.03:
        return "reduce_scatter" if reduces else "allgather"
    raise ValueError(f"{source}: busbw/algbw is {ratio:.3f} on {n} ranks, which is no collective's factor: "
                     f"the '# Using devices' block does not match the rows")


# ---------------------------------------------------------------- fabriclab collectives bench

_BENCH_TITLE = re.compile(r"collectives bench:\s*(\w+),\s*(\d+)\s+ranks")
_EMU_SUMMARY = re.compile(r"^all \d+ ranks? exited|^rank \d+ exited")
_BENCH_NEEDED = ("algo", "size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)")


def parse_bench_table(text: str, source: str = "<text>") -> list[NcclRun]:
    """The runs (one per algorithm) of a `fabriclab collectives bench` table (plain, csv or rich)."""
    title = _BENCH_TITLE.search(text)
    if title is None:
        raise ValueError(f"{source}: no 'collectives bench: OP, N ranks' title line: pass the whole output "
                         f"of `fabriclab collectives bench` (any --format but json)")
    collective, num_ranks = title.group(1), int(title.group(2))
    # `fabriclab emu run` prefixes each line with `[RANK] ` and ends with a summary line ("all N ranks ...")
    lines = [_PREFIX.sub("", ln, count=1).strip().lstrip("#").strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if not _EMU_SUMMARY.match(ln)]
    header_at = next((i for i, ln in enumerate(lines) if all(c in ln for c in _BENCH_NEEDED)), None)
    if header_at is None:
        raise ValueError(f"{source}: no header line with {', '.join(_BENCH_NEEDED)}")
    is_csv = "," in lines[header_at]
    split = (lambda s: next(csv.reader(io.StringIO(s)))) if is_csv else (lambda s: s.split())
    columns = split(lines[header_at].replace("vs native", "vs-native"))
    by_algo: dict[str, list[NcclRow]] = {}
    for offset, line in enumerate(lines[header_at + 1:], start=header_at + 2):
        if not line or set(line) <= set("─━-=+| "):
            continue
        cells = split(line)
        if len(cells) != len(columns):
            raise ValueError(f"{_where(source, offset)}: expected {len(columns)} cells, found {len(cells)}: "
                             f"the table is cut off or mixed")
        cell = dict(zip(columns, cells))
        try:
            row = NcclRow(size_bytes=int(cell["size(B)"]), count=int(cell.get("count(elements)", 0)),
                          dtype=cell.get("type", "float32"), redop=cell.get("redop", "sum"),
                          root=int(cell.get("root", -1)), time_us=float(cell["time(us)"]),
                          algbw_GBps=float(cell["algbw(GB/s)"]), busbw_GBps=float(cell["busbw(GB/s)"]),
                          error=cell.get("#wrong", "N/A"))
        except ValueError as exc:
            raise ValueError(f"{_where(source, offset)}: cannot read {line!r} ({exc})") from None
        by_algo.setdefault(cell["algo"], []).append(row)
    if not by_algo:
        raise ValueError(f"{source}: the bench table has no rows")
    hosts = tuple(f"host{r}" for r in range(num_ranks))
    return [NcclRun(source=f"{source} [{algo}]", collective=collective, hosts=hosts, label=algo,
                    layout_assumed=True, rows=tuple(sorted(rows, key=lambda r: r.size_bytes)))
            for algo, rows in by_algo.items()]


def read_runs(path: Path | str) -> list[NcclRun]:
    """The runs of one file: nccl-tests output, or a `fabriclab collectives bench` table."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if _BENCH_TITLE.search(text) and not _NTHREAD.search(text):
        return parse_bench_table(text, str(path))
    return parse_nccl_tests(text, str(path))


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        for r in read_runs(arg):
            print(f"{r.source}: {r.collective}, {r.num_ranks} ranks on {r.num_servers} servers x "
                  f"{r.gpus_per_server}, {r.gpus_per_process} GPUs per process, {len(r.rows)} rows")
