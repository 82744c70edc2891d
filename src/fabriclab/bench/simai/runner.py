"""Run SimAI on one case: its packet-level ns-3 binary and its analytical one, each in a folder of its own.

Both run through the wrappers of SimAI's folder (`bin/simai-simulator`, `bin/simai-analytical`: they prepare
the working directory the binaries read and write), in a new temporary folder removed afterwards, as their
own process group (killed whole at the time limit or on an interrupt). The ns-3 run is what
../shared/tools/simai/README.md says works: under `setarch $(uname -m) -R` (no address randomisation: fewer
crashes, less spread), one thread, `AS_SEND_LAT=3 AS_NVLS_ENABLE=1` (SimAI's README), and `AS_PXN_ENABLE=1`
on a rail fabric (MockNccl otherwise sends every ring flow from the sender's own NIC across the spines,
where NCCL, and fabriclab's rail model, move it over NVLink to the NIC of the receiver's rail). Its time is
the `wg total comm` column (us) of `c0` in `ncclFlowModel_EndToEnd.csv`; a run whose file is complete counts
even when the process then dies (a SIGSEGV at teardown, exit 139, is known), and says so in its note.
The analytical binary gets the NVLink and NIC rates of SimAI's own example (in its GB/s of 2^30 B/s), and its
time is read from the algbw it prints (its time column is rounded to 1 us).

Folder: `--simai PATH`, else `$FABRICLAB_SIMAI`, else the build beside this checkout (../shared/tools/simai).

Try it: `fabriclab bench simai --gpus 32 --fabrics fat-tree --oversubscription 1 --collectives allreduce
--sizes 16MiB --repeats 1`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from fabriclab.bench.process_group import own_group, wait_for
from fabriclab.bench.simai.fct import flow_stats, read_flows
from fabriclab.bench.simai.inputs import SimaiCase, leaf_of, topology_name, topology_text, workload_text

ENV = "FABRICLAB_SIMAI"
REPOSITORY = Path(__file__).resolve().parents[4]  # src/fabriclab/bench/simai/runner.py in a checkout
CHECKOUT_FOLDER = REPOSITORY.parent / "shared" / "tools" / "simai"
SIMULATOR, ANALYTICAL, CONFIG = Path("bin/simai-simulator"), Path("bin/simai-analytical"), Path("inputs/SimAI.conf")
HINT = (f"give SimAI's folder (with bin/simai-simulator, bin/simai-analytical and inputs/SimAI.conf, as "
        f"../shared/tools/simai) with --simai PATH or the environment variable {ENV}")
NS3_ENV = {"AS_SEND_LAT": "3", "AS_NVLS_ENABLE": "1"}  # SimAI's README: 3 us send latency, NVLS on
RAIL_ENV = {"AS_PXN_ENABLE": "1"}
# SimAI-Analytical's link rates, GB/s of 2^30 B/s: its example's (NVLink 423.5e9, NIC 49.7e9 B/s)
ANALYTICAL_ARGS = ("-g_p_s", "8", "-n_p_s", "8", "-g_type", "H100", "-nv", "394.4", "-nic", "46.3")
POLL_S = 0.2  # how often a run's peak memory (VmHWM) is read
GIB = 1 << 30


def find_simai(given: str | Path | None = None) -> Path:
    """SimAI's folder: `given`, else $FABRICLAB_SIMAI, else the one beside this checkout; a ValueError says
    where it looked and how to give it."""
    source = given if given is not None else os.environ.get(ENV)
    start = Path(source) if source else CHECKOUT_FOLDER
    for folder in (start, start.parent):  # the folder, or its bin/
        if all(os.access(folder / p, os.X_OK) for p in (SIMULATOR, ANALYTICAL)) and (folder / CONFIG).is_file():
            if shutil.which("setarch") is None:
                raise ValueError("setarch is not on PATH: SimAI's ns-3 binary runs under `setarch -R` (Debian: "
                                 "apt-get install util-linux)")
            return folder.resolve()
    where = ("--simai" if given is not None else f"${ENV}") if source else "the checkout's default"
    raise ValueError(f"{where} {start}: no SimAI there (bin/simai-simulator, bin/simai-analytical, "
                     f"inputs/SimAI.conf); {HINT}")


@dataclass(frozen=True, kw_only=True)
class Process:
    """One finished (or stopped) process."""

    returncode: int | None
    """Its exit status (negative: the signal that ended it); None: stopped at the time limit."""
    wall_s: float
    peak_rss_MiB: float
    """Its resident memory's high-water mark (VmHWM), read every POLL_S while it ran."""
    output_tail: str


def run_process(argv: list[str], *, cwd: Path, env: dict, timeout_s: float) -> Process:
    """Run `argv` in `cwd` as its own process group, its output to `cwd/output.log`; the whole group is
    killed when the run ends: past `timeout_s`, when this process is interrupted, and after the binary
    exits, so nothing it started outlives it (`bench/process_group.py`)."""
    log = cwd / "output.log"
    peak = 0
    with log.open("wb") as out:
        start = time.perf_counter()
        with own_group(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                       stderr=subprocess.STDOUT) as proc:
            code: int | None = None
            while code is None and time.perf_counter() - start <= timeout_s:
                code = wait_for(proc, POLL_S)
                if code is None:
                    peak = max(peak, _high_water_kB(proc.pid))
        wall_s = time.perf_counter() - start
    return Process(returncode=code, wall_s=wall_s, peak_rss_MiB=peak / 1024,
                   output_tail=log.read_bytes()[-2000:].decode(errors="replace"))


def _high_water_kB(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


@dataclass(frozen=True, kw_only=True)
class SimaiRun:
    """One run of a SimAI binary on one case."""

    time_s: float | None
    """The collective's time; None when the run failed (`error`)."""
    wall_s: float
    peak_rss_MiB: float
    exit_code: int | None
    """None: stopped at the time limit."""
    note: str = ""
    """What went otherwise than a clean exit and was still read (a crash at teardown)."""
    error: str = ""
    """Why the run gave no time; empty when it did."""
    flows: dict = field(default_factory=dict)
    """ns-3 only: its flow log in a few numbers (`fct.flow_stats`)."""


def run_ns3(case: SimaiCase, simai: Path, *, timeout_s: float) -> SimaiRun:
    """The packet-level time of `case` (module docstring), in a temporary folder removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="fabriclab-simai-"))
    try:
        topology = topology_name(case.num_gpus, case.fabric)
        (folder / topology).write_text(topology_text(case.num_gpus, case.fabric, case.oversubscription))
        (folder / "workload.txt").write_text(workload_text(case))
        shutil.copyfile(simai / CONFIG, folder / "SimAI.conf")
        env = {**os.environ, **NS3_ENV, **(RAIL_ENV if case.fabric == "rail" else {})}
        argv = ["setarch", os.uname().machine, "-R", str(simai / SIMULATOR), "-t", "1", "-w", "workload.txt",
                "-n", topology, "-c", "SimAI.conf"]
        proc = run_process(argv, cwd=folder, env=env, timeout_s=timeout_s)
        time_us = end_to_end_us(folder / "ncclFlowModel_EndToEnd.csv", require_total=True)
        fct = folder / "out" / "fct.txt"
        flows = {}
        if time_us is not None and fct.is_file():
            with fct.open() as lines:
                flows = flow_stats(read_flows(lines), leaf=partial(leaf_of, fabric=case.fabric))
        return _outcome(proc, None if time_us is None else time_us * 1e-6, timeout_s, flows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_analytical(case: SimaiCase, simai: Path, *, timeout_s: float) -> SimaiRun:
    """SimAI-Analytical's time of `case`, in a temporary folder removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="fabriclab-simai-analytical-"))
    try:
        (folder / "workload.txt").write_text(workload_text(case))
        argv = [str(simai / ANALYTICAL), "-w", "workload.txt", "-g", str(case.num_gpus), *ANALYTICAL_ARGS,
                "-r", "run-"]
        proc = run_process(argv, cwd=folder, env=dict(os.environ), timeout_s=timeout_s)
        seconds = analytical_seconds(folder / "results" / "run-EndToEnd.csv", case.size_bytes)
        return _outcome(proc, seconds, timeout_s, {})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _outcome(proc: Process, seconds: float | None, timeout_s: float, flows: dict) -> SimaiRun:
    common = {"wall_s": proc.wall_s, "peak_rss_MiB": proc.peak_rss_MiB, "exit_code": proc.returncode}
    if proc.returncode is None:
        return SimaiRun(time_s=None, error=f"ran past the {timeout_s:g} s limit and was stopped", **common)
    if seconds is None:
        tail = " ".join(proc.output_tail.split()[-30:])
        return SimaiRun(time_s=None, error=f"exited with {proc.returncode} without its result; its output ends: "
                                           f"{tail[-300:]}", **common)
    note = (f"exited with {proc.returncode} after writing its result (a crash at teardown); the result is "
            f"kept" if proc.returncode else "")
    return SimaiRun(time_s=seconds, note=note, flows=flows, **common)


def end_to_end_us(path: Path, *, require_total: bool = False) -> float | None:
    """The `wg total comm` (us) of row `c0` of a SimAI EndToEnd.csv; None when the file or the row is missing
    or, with `require_total`, when the file has no `total time` (the run did not finish writing it)."""
    if not path.is_file() or (require_total and "total time" not in path.read_text(errors="replace")):
        return None
    row = _c0_row(path)
    return None if row is None or len(row) < 12 else _number(row[11])


def analytical_seconds(path: Path, size_bytes: int) -> float | None:
    """SimAI-Analytical's time of row `c0`: size / its algbw (GB/s of 2^30 B/s, 2 decimals), else its `wg total
    comm` column (us, rounded to 1 us); None when neither is there."""
    row = _c0_row(path)
    if row is None or len(row) < 12:
        return None
    algbw = _number(row[12]) if len(row) > 12 else None
    if algbw:
        return size_bytes / (algbw * GIB)
    us = _number(row[11])
    return None if us is None else us * 1e-6


def _c0_row(path: Path) -> list[str] | None:
    if not path.is_file():
        return None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("c0,"):
            return line.split(",")
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value >= 0 else None  # not NaN ("-nan" where nothing ran)
