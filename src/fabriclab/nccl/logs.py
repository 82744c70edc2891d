"""Read the output of nccl-tests' binaries and of `fabriclab collectives bench`.

Read: all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, broadcast_perf, reduce_perf,
sendrecv_perf (hypercube, scatter, gather, alltoallv are refused by name). A run gives the collective,
the ranks (`#  Rank N ... on HOST device D`: servers and GPUs per server), the GPUs one process drove
(`nThread T nGpus G`), the NCCL version when the log says it, and one row per size, out of place and in
place. Layouts (nccl-tests src/common.cu, src/util.cu from 2.17): before 2.13 each binary printed its own
columns (`size count type [redop] [root] time algbw busbw error`, alltoall an empty redop); from 2.13 all
print `size count type redop root time algbw busbw #wrong` (redop `none`, root -1 where there is none;
`N/A` without validation); later ones add per-iteration and timestamp columns. Columns are found by name.
`size` is the whole buffer (`count` is per rank for all_gather, reduce_scatter, alltoall), so algbw =
size / time for every binary read, and busbw = algbw x its factor (`collectives.schedule.BUS_FACTORS`).

The collective: the run's `# Collective test starting: X_perf` (nccl-tests 2.16.7 on), else a command
line in the log naming `X_perf`, else the `collective` argument, else a file name holding `X_perf`, else
what the columns, counts and busbw/algbw leave (allreduce where it is among them). The NCCL version:
NCCL's `NCCL version 2.18.3+cuda12.2` (NCCL_DEBUG=INFO or VERSION) or nccl-tests' `nccl-library=21803`.
Prefixes of mpirun (`[1,0]<stdout>:`) and srun (`0: `), NCCL INFO lines and other chatter are skipped.
A file may hold several tests one after another (one run each); a test sweeping several types,
reductions or roots (`-d all`, `-o all`, `-r -1`) gives one run per table. Errors name the file and line
and say what to change: no table, a run cut off, rows of processes or runs interleaved, a busbw that is
not algbw x the factor, wrong results (`# Out of bounds values : N FAILED`).

`fabriclab collectives bench` output (plain, csv or rich table) becomes one run per algorithm; it
names no hosts, so one rank per host is assumed (the emulated clusters run one rank per namespace).

Try it: `python -m fabriclab.nccl.logs examples/nccl-tests-a100/nccl_16.log tests/nccl/data/*.log`.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.textfile import read_text

# nccl-tests binary stem (src/<stem>.cu) -> our collective name (collectives/schedule.py's).
TEST_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter",
              "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv"}
COLLECTIVES = tuple(TEST_NAMES.values())
# Binaries nccl-tests also builds that fabriclab has no model of (hypercube's algbw counts n-1 blocks;
# scatter and gather are rooted one-to-all exchanges; alltoallv's sizes vary per peer).
REFUSED_TESTS = ("hypercube", "scatter", "gather", "alltoallv")
_ROOTED = {"broadcast", "reduce"}
_PER_RANK_COUNT = {"allgather", "reduce_scatter", "alltoall"}  # `count` is size / ranks / element size
# Bytes per element of nccl-tests' type names (src/common.cu test_typenames; NCCL 1's `char`, `int`).
TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8, "uint64": 8,
              "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}


@dataclass(frozen=True, kw_only=True)
class NcclRow:
    """One size of a run: the out-of-place columns and, when measured, the in-place ones."""

    size_bytes: int
    """Buffer size (nccl-tests' `size`, bytes): the whole buffer, also where `count` is per rank."""
    count: int
    """Elements (nccl-tests' `count`): per rank for allgather, reduce_scatter and alltoall."""
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
    """allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce or sendrecv."""
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
    nccl_version: str | None = None
    """NCCL that ran it, `major.minor.patch` ("2.18.3"), from NCCL's `NCCL version` line or nccl-tests'
    `nccl-library=` header; None when the log says neither."""
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


def version_from_code(code: int) -> str:
    """`major.minor.patch` of an NCCL_VERSION_CODE: nccl.h's NCCL_VERSION(X,Y,Z) is X*1000 + Y*100 + Z up to
    2.8 and X*10000 + Y*100 + Z from 2.9 on (21803 -> 2.18.3, 2708 -> 2.7.8)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def version_code(version: str) -> int:
    """NCCL_VERSION_CODE of `major.minor.patch`, the inverse of `version_from_code`."""
    major, minor, patch = (int(part) for part in version.split("."))
    return major * 1000 + minor * 100 + patch if major <= 2 and minor <= 8 else major * 10000 + minor * 100 + patch


def collective_name(word: str) -> str:
    """Our name for `word`: a collective (`allgather`) or an nccl-tests binary (`all_gather_perf`,
    `all_gather`); a ValueError naming what is read for anything else."""
    stem = re.sub(r"_perf(_mpi)?$", "", word.strip().lower())
    if stem in COLLECTIVES:
        return stem
    if stem in TEST_NAMES:
        return TEST_NAMES[stem]
    readable = ", ".join(f"{t}_perf" for t in TEST_NAMES)
    if stem in REFUSED_TESTS:
        raise ValueError(f"{stem}_perf is not read: fabriclab models {readable}; leave that test out")
    raise ValueError(f"unknown collective {word!r}: use one of {', '.join(COLLECTIVES)} (or {readable})")


_PREFIX = re.compile(r"^(?:\[(\d+),(\d+)\]<(stdout|stderr)>:|(\d+): |\[(\d+)\] )")
_NTHREAD = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s*(.*)$")
_ROW_START = re.compile(r"^\d+\s+\d+(\s|$)")
_TEST = re.compile(r"Collective test starting:\s*(\S+)")
# A binary's name, longest stems first (reduce_scatter before reduce, all_gather before gather).
_BINARY = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted((*TEST_NAMES, *REFUSED_TESTS), key=len, reverse=True))
                     + r")_perf")
_LIBRARY = re.compile(r"nccl-tests version \S+ nccl-headers=\d+ nccl-library=(\d+)")
_NCCL_SAYS = re.compile(r"\bNCCL version (\d+)\.(\d+)\.(\d+)")
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")
# nccl-tests' closing check of the results: `# Out of bounds values : 0 OK` (or `48 FAILED`).
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)")
_COLUMN_NAMES = {"size", "count", "type", "redop", "root", "time", "cputime", "algbw", "busbw", "error", "#wrong",
                 "i_min", "i_max", "i_p99", "i_cv%", "timestamp"}
_NEEDED = ("size", "count", "time", "algbw", "busbw")
# log_writer's summary of a large prediction's ranks: `#  1,024 ranks on 128 servers (a to b), 8 GPU each; ...`
_SUMMARY = re.compile(r"^#\s*([\d,]+) ranks on ([\d,]+) servers \(.*\), (\d+) .* each; the first server's ranks:")
_PLACED = {"time", "algbw", "busbw", "error", "#wrong", "i_min", "i_max", "i_p99", "i_cv%"}  # per placement


class _Run:
    """A run being read: its header facts, then its rows. Facts printed before its `# nThread` line
    (test name, versions) are gathered in a `_Run` of their own and handed on (`before`)."""

    def __init__(self, line_no: int, threads_gpus: tuple[int, int] | None, before: _Run | None = None):
        self.first_line = line_no
        self.threads_gpus = threads_gpus
        self.ranks: dict[int, tuple[str, str, str]] = {}
        self.columns: list[str] | None = None
        self.rows: list[tuple[int, NcclRow]] = []
        self.row_prefix: str | None = None
        self.finished = False
        self.test: str | None = before.test if before else None
        """Binary stem from the run's `Collective test starting` line."""
        self.binary: str | None = before.binary if before else None
        """Binary stem from a command line before the run."""
        self.version: tuple[str, int] | None = before.version if before else None
        """(NCCL version, line saying it)."""
        self.empty_redop = False
        """Rows print nothing under the `redop` heading: alltoall_perf before nccl-tests 2.13."""
        self.summary: tuple[int, int] | None = None
        """(ranks, servers) of `log_writer`'s one-line summary of a large prediction's rank list."""


def _where(source: str, line_no: int) -> str:
    return f"{source}, line {line_no}"


def _refuse(name: str, where: str) -> ValueError:
    return ValueError(f"{where}: {name} is not read: fabriclab models "
                      f"{', '.join(f'{t}_perf' for t in TEST_NAMES)}; leave that test out of the log")


def _stem(word: str, source: str, line_no: int) -> str:
    """The binary stem of `word` (`all_gather_perf`, `./build/all_gather_perf_mpi`); refused ones are errors."""
    found = _BINARY.search(word)
    if found is None or found.group(1) in REFUSED_TESTS:
        raise _refuse(found.group(1) + "_perf" if found else word, _where(source, line_no))
    return found.group(1)


def _note_version(run: _Run, version: str, line_no: int, source: str) -> None:
    if run.version is not None and run.version[0] != version:
        raise ValueError(f"{_where(source, line_no)}: NCCL {version}, but line {run.version[1]} says NCCL "
                         f"{run.version[0]} for the same run: the log mixes runs of two NCCL versions; split it")
    run.version = run.version or (version, line_no)


def parse_nccl_tests(text: str, source: str = "<text>", *, collective: str | None = None) -> list[NcclRun]:
    """Every run in nccl-tests output `text`. `collective` (ours or a binary's name) names the test of runs
    whose log does not name it. A ValueError naming `source` and the line on bad input."""
    fallback = (collective_name(collective), f"collective={collective!r}") if collective else None
    runs: list[_Run] = []
    current: _Run | None = None
    before = _Run(0, None)
    for line_no, raw in enumerate(text.splitlines(), start=1):
        raw = raw.lstrip()  # srun's ` 0: ` as copied with its leading space
        prefix_match = _PREFIX.match(raw)
        prefix = prefix_match.group(0) if prefix_match else ""
        line = raw[len(prefix):].strip()
        if not line:
            continue
        open_run = current if current is not None and not current.finished else None
        said = _NCCL_SAYS.search(line) or _LIBRARY.search(line)
        if said:
            version = (".".join(said.groups()) if said.re is _NCCL_SAYS
                       else version_from_code(int(said.group(1))))
            _note_version(open_run or before, version, line_no, source)
        if line.startswith("#"):
            if test := _TEST.search(line):
                before.test = _stem(test.group(1), source, line_no)
                continue
            threads = _NTHREAD.search(line)
            if threads:
                if open_run is not None:
                    raise _truncated(source, open_run, line_no)
                current = _Run(line_no, (int(threads.group(1)), int(threads.group(2))), before)
                before = _Run(0, None)
                runs.append(current)
                continue
            if current is not None:
                _header_line(current, line, source, line_no)
            continue
        stems = {m[1] for m in _BINARY.finditer(line)}
        if open_run is None and len(stems) == 1 and not _NCCL_LOG.search(line):
            before.binary = stems.pop()  # a command line naming one binary: `mpirun ... ./all_gather_perf -b 8`
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
        row, empty_redop = _parse_row(line, current.columns, source, line_no)
        current.rows.append((line_no, row))
        current.empty_redop |= empty_redop
    if not runs:
        raise ValueError(f"{source}: no nccl-tests output found (no '# nThread ... nGpus ...' header): "
                         f"give the output of an nccl-tests binary such as all_reduce_perf")
    if not runs[-1].finished:
        raise _truncated(source, runs[-1], None)
    named = fallback or _file_collective(source)
    many = len(runs) > 1
    return [r for i, run in enumerate(runs) for r in _finish(run, source, f"run {i + 1}" if many else "", named)]


def _header_line(run: _Run, line: str, source: str, line_no: int) -> None:
    """A `#` line inside a run: a rank, the column names, the end of the table or its check."""
    if rank := _RANK.match(line):
        run.ranks[int(rank.group(1))] = (rank.group(3), rank.group(2), rank.group(5).strip())
    elif summary := _SUMMARY.match(line):
        run.summary = (int(summary.group(1).replace(",", "")), int(summary.group(2).replace(",", "")))
    elif _is_column_header(line, source, line_no):
        run.columns = line.lstrip("#").split()
    elif line.startswith("# Avg bus bandwidth"):
        run.finished = True
    elif (wrong := _OUT_OF_BOUNDS.match(line)) and wrong.group(2) != "OK":
        raise ValueError(f"{_where(source, line_no)}: {line!r}: nccl-tests found wrong results in the run "
                         f"that starts at line {run.first_line}; its times are not to be trusted: "
                         f"fix the run (or drop this log) before fitting or comparing it")


def _is_column_header(line: str, source: str, line_no: int) -> bool:
    words = line.lstrip("#").split()
    if len(words) < 6 or words[0] != "size":
        return False
    unknown = [w for w in words if w not in _COLUMN_NAMES]
    missing = [w for w in _NEEDED if w not in words and not (w == "time" and "cputime" in words)]
    if unknown or missing:
        raise ValueError(f"{_where(source, line_no)}: a column header with "
                         f"{'unknown columns ' + ' '.join(unknown) if unknown else 'no ' + ' '.join(missing)}: "
                         f"expected nccl-tests' columns (size count type redop root time algbw busbw #wrong "
                         f"..., or error before 2.13); pass unedited nccl-tests output")
    return True


def _truncated(source: str, run: _Run, line_no: int | None) -> ValueError:
    where = f"before line {line_no}" if line_no else "at the end of the file"
    got = f"{len(run.rows)} rows" if run.rows else "no rows"
    return ValueError(f"{source}: the run that starts at line {run.first_line} is cut off {where} ({got}, "
                      f"no '# Avg bus bandwidth' line): pass the complete output of the run")


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _parse_row(line: str, columns: list[str], source: str, line_no: int) -> tuple[NcclRow, bool]:
    """The row, and whether its redop was printed empty."""
    words = line.split()
    names = ["time" if c == "cputime" else c for c in columns if c != "timestamp"]
    if "timestamp" in columns and len(words) == len(names) + 2:
        words = words[:len(names)]  # `-T`: the in-place columns end with a `YYYY-MM-DD hh:mm:ss` stamp
    empty_redop = len(words) == len(names) - 1 and "redop" in names and _is_number(words[names.index("redop")])
    if empty_redop:
        names.remove("redop")  # before 2.13 alltoall_perf printed an empty redop under its `redop` heading
    if len(words) != len(names):
        raise ValueError(f"{_where(source, line_no)}: expected {len(names)} fields ({' '.join(names)}), "
                         f"found {len(words)}: the line is cut off or not an nccl-tests row")
    first: dict[str, str] = {}
    second: dict[str, str] = {}
    for name, word in zip(names, words):
        (second if name in first and name in _PLACED else first)[name] = word
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
    return NcclRow(**out), empty_redop


def _finish(run: _Run, source: str, run_name: str, fallback: tuple[str, str] | None) -> list[NcclRun]:
    """The run's tables as NcclRuns, each named `source (run 2, half max root 3)` where needed."""
    named = f"{source} ({run_name})" if run_name else source
    if not run.ranks:
        raise ValueError(f"{named}: no '#  Rank N ... on HOST device D' lines after line {run.first_line}: "
                         f"keep nccl-tests' '# Using devices' block, it tells the servers and GPUs (a log kept "
                         f"without it, as in examples/nccl-corpus, is read with the corpus.json that names it: keep "
                         f"them in one folder)")
    missing = sorted(set(range(max(run.ranks) + 1)) - set(run.ranks))
    if missing:
        raise ValueError(f"{named}: the '# Using devices' block lists no rank {missing[0]}: "
                         f"pass the complete header of the run")
    # all_gather, reduce_scatter and alltoall print size 0 where count < ranks: no bandwidth in them
    rows = [(n, r) for n, r in run.rows if r.size_bytes > 0]
    if not rows:
        raise ValueError(f"{named}: the run at line {run.first_line} has a header but no rows")
    hosts = tuple(run.ranks[r][0] for r in range(len(run.ranks)))
    if run.summary is not None:  # fabriclab's own prediction of many ranks: the layout its summary states
        total, servers = run.summary
        if total % servers or len(hosts) != total // servers:
            raise ValueError(f"{named}: the rank summary says {total:,} ranks on {servers:,} servers and lists "
                             f"{len(hosts)} ranks of the first: pass the log as fabriclab wrote it")
        per = total // servers
        hosts = tuple(hosts[0] if r < per else f"server-{r // per:03d}" for r in range(total))
    collective = _collective(run, hosts, [r for _, r in rows], named, fallback)
    tables = _tables(rows, named)
    keys = [(t[0].dtype, t[0].redop, t[0].root) for t in tables]
    varies = [len({k[i] for k in keys}) > 1 for i in range(3)]
    threads, gpus = run.threads_gpus or (1, 1)
    out = []
    for key, table in zip(keys, tables):
        what = " ".join(part for part, v in zip((key[0], key[1], f"root {key[2]}"), varies) if v)
        name = ", ".join(p for p in (run_name, what) if p)
        out.append(NcclRun(source=f"{source} ({name})" if name else source, collective=collective, hosts=hosts,
                           gpus_per_process=threads * gpus, device_name=run.ranks[0][2],
                           nccl_version=run.version[0] if run.version else None, rows=tuple(table)))
    return out


def _tables(rows: list[tuple[int, NcclRow]], source: str) -> list[list[NcclRow]]:
    """Rows split where the type, reduction or root changes (nccl-tests' -d all, -o all, -r -1 sweep the
    sizes once per value); sizes increase within a table and no table comes twice."""
    tables: list[list[NcclRow]] = []
    for line_no, row in rows:
        key = (row.dtype, row.redop, row.root)
        last = tables[-1][-1] if tables else None
        if last is not None and (last.dtype, last.redop, last.root) == key:
            if row.size_bytes <= last.size_bytes:
                raise ValueError(f"{_where(source, line_no)}: size {row.size_bytes} follows size "
                                 f"{last.size_bytes}: rows of several runs are mixed (or nccl-tests repeated "
                                 f"its sweep, -N); split the log into one file per run")
            tables[-1].append(row)
        elif any((t[0].dtype, t[0].redop, t[0].root) == key for t in tables):
            raise ValueError(f"{_where(source, line_no)}: the rows of {' '.join(map(str, key))} start again "
                             f"after other rows: rows of several runs are mixed; split the log")
        else:
            tables.append([row])
    return tables


def _file_collective(source: str) -> tuple[str, str] | None:
    found = _BINARY.search(Path(source).name)
    if found is None or found.group(1) in REFUSED_TESTS:
        return None
    return TEST_NAMES[found.group(1)], f"the file name {Path(source).name!r}"


def _collective(run: _Run, hosts: tuple[str, ...], rows: list[NcclRow], source: str,
                fallback: tuple[str, str] | None) -> str:
    """The collective from the log, `fallback` or the rows; busbw/algbw checked against its factor."""
    n = len(hosts)
    stem = run.test or run.binary
    if stem in REFUSED_TESTS:
        raise _refuse(f"{stem}_perf", f"{source} (the command line before line {run.first_line})")
    if stem:
        name, how = TEST_NAMES[stem], f"the log's {stem}_perf"
    elif fallback:
        name, how = fallback
    else:
        name, how = _infer_collective(rows, n, source, run.empty_redop), "the columns and busbw/algbw"
    if n > 1:
        factor = bus_bandwidth_factor(name, n)
        for row in rows:
            if row.algbw_GBps >= 1.0 and abs(row.busbw_GBps / row.algbw_GBps - factor) > 0.02 * factor + 0.01:
                raise ValueError(f"{source}: at size {row.size_bytes} busbw/algbw is "
                                 f"{row.busbw_GBps / row.algbw_GBps:.3f}, not {factor:.3f} as {name} (from "
                                 f"{how}) on {n} ranks gives: the rows and the '# Using devices' block do not "
                                 f"belong to one run, or the log is not {name}'s")
    return name


def _infer_collective(rows: list[NcclRow], n: int, source: str, empty_redop: bool) -> str:
    """Logs before nccl-tests 2.16.7 do not name their test: the root and redop columns, whether `count` is
    per rank, and busbw/algbw leave candidates; allreduce where it is one of them, else an error."""
    left = set(_ROOTED) if any(r.root >= 0 for r in rows) else set(COLLECTIVES) - _ROOTED
    # sendrecv prints the -o reduction from 2.13 on (src/sendrecv.cu), and no redop column before
    reduces = {"allreduce", "reduce", "reduce_scatter", "sendrecv"}
    left &= reduces if any(r.redop not in ("none", "") for r in rows) else set(COLLECTIVES) - reduces | {"sendrecv"}
    if empty_redop:
        left &= {"alltoall"}
    sized = [r for r in rows if r.count > 0 and r.dtype in TYPE_BYTES]
    if n > 1 and sized:
        if all(r.count * TYPE_BYTES[r.dtype] * n == r.size_bytes for r in sized):
            left &= _PER_RANK_COUNT
        elif all(r.count * TYPE_BYTES[r.dtype] == r.size_bytes for r in sized):
            left -= _PER_RANK_COUNT
    measured = [r.busbw_GBps / r.algbw_GBps for r in rows if r.algbw_GBps >= 1.0]
    ratio = sorted(measured)[len(measured) // 2] if measured else None
    if n > 1 and ratio is not None:
        left = {c for c in left if abs(ratio - bus_bandwidth_factor(c, n)) < 0.03}
    if len(left) == 1 or "allreduce" in left:
        return left.pop() if len(left) == 1 else "allreduce"
    if not left:
        seen = f"busbw/algbw is {ratio:.3f} on {n} ranks" if ratio is not None else f"the columns on {n} ranks"
        raise ValueError(f"{source}: {seen}, which fits no collective with these columns: the '# Using "
                         f"devices' block does not match the rows")
    raise ValueError(f"{source}: the log does not name its test (no '# Collective test starting' line) and its "
                     f"rows fit {' and '.join(sorted(left))} alike: name the file after the binary "
                     f"(all_gather_perf.log) or pass collective=")


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
        if line.startswith("conclusion:"):  # the bench's verdict after its table (on stderr, merged by emu run)
            break
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


def read_runs(path: Path | str, *, collective: str | None = None) -> list[NcclRun]:
    """The runs of one file: nccl-tests output, or a `fabriclab collectives bench` table; `collective`
    names the test of nccl-tests runs whose log does not (see `parse_nccl_tests`)."""
    path = Path(path)
    try:
        text = read_text(path, "log")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if _BENCH_TITLE.search(text) and not _NTHREAD.search(text):
        return parse_bench_table(text, str(path))
    return parse_nccl_tests(text, str(path), collective=collective)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        for r in read_runs(arg):
            print(f"{r.source}: {r.collective}, {r.num_ranks} ranks on {r.num_servers} servers x "
                  f"{r.gpus_per_server}, {r.gpus_per_process} GPUs per process, {len(r.rows)} rows, "
                  f"NCCL {r.nccl_version or 'version not given'}")
