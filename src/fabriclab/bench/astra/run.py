"""Run ASTRA-sim (its analytical network backend) on fabriclab rank graphs, as the peer of the step simulator.

`run_graphs_in_astra` writes the graphs as Chakra traces (`workload/chakra.py`) and the configurations of the
same cluster (`configs.py`) into a folder, runs the binary with a time limit and reads every `sys[N]
finished, X cycles` line (astra-sim/workload/Workload.cc report; one cycle is 1 ns). ASTRA-sim exits 0 even
when ranks never finish (a receive without its send, a collective some of its group never reaches), so a
rank without that line is what says it stalled. `collective_seconds` times single collectives the same way:
one comm node on the ranks of a group, nothing on the others. The binary runs as a process group of its
own, ended with all it started however the run ends (`bench/process_group.py`), and a temporary folder is
removed however the run ends (give a folder to keep the traces).

Binary: `--astra-sim PATH` (the file, or a folder holding it or `bin/` with it), else `$FABRICLAB_ASTRA_SIM`,
else the build beside this checkout (`../shared/tools/astra-sim/bin`). It needs Debian's `libprotobuf32`.

Try it: `fabriclab bench astra-sim --astra-sim ../shared/tools/astra-sim/bin`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fabriclab.bench.astra.configs import network_config, snake_ring, write_configs
from fabriclab.bench.process_group import own_group, wait_for
from fabriclab.fabric.cluster import ClusterModel
from fabriclab.workload.chakra import comm_groups_path, group_ids, write_et
from fabriclab.workload.graph import Op, RankGraph

ENV = "FABRICLAB_ASTRA_SIM"
BINARY = "AstraSim_Analytical_Congestion_Unaware"  # multi-dimensional networks (the -Aware one: 1 dimension)
REPOSITORY = Path(__file__).resolve().parents[4]  # src/fabriclab/bench/astra/run.py in a checkout
CHECKOUT_BUILD = REPOSITORY.parent / "shared" / "tools" / "astra-sim" / "bin"
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")
MAX_GROUPS = (2**31 - 1) // 1_000_000  # 2147: beyond, a group's first stream id overflows an int
HINT = (f"give the binary with --astra-sim PATH or the environment variable {ENV} (ASTRA-sim's "
        f"{BINARY}, built with build/astra_analytical/build.sh; it needs libprotobuf32 on Debian)")


class AstraSimError(RuntimeError):
    """ASTRA-sim failed, ran past its time limit, or left ranks unfinished."""


def find_binary(given: str | Path | None = None) -> Path:
    """The ASTRA-sim binary: `given`, else $FABRICLAB_ASTRA_SIM, else the build beside this checkout; a
    ValueError says how to give it."""
    source = given if given is not None else os.environ.get(ENV)
    candidates = [Path(source)] if source else [CHECKOUT_BUILD]
    for path in candidates:
        for p in (path, path / BINARY, path / "bin" / BINARY):
            if p.is_file() and os.access(p, os.X_OK):
                return p.resolve()  # it runs in the folder of its files: a relative path would miss
    if source:
        where = "--astra-sim" if given is not None else f"${ENV}"
        raise ValueError(f"{where} {source}: no executable ASTRA-sim there (the file {BINARY}, or a folder "
                         f"with it or with bin/{BINARY}); {HINT}")
    raise ValueError(f"ASTRA-sim not found; {HINT}")


@dataclass(frozen=True, kw_only=True)
class AstraRun:
    """One run of ASTRA-sim."""

    finish_ns: dict[int, int]
    """Rank -> the cycle (ns) its `sys[rank] finished` line gave."""
    num_ranks: int
    wall_s: float
    """The binary's wall time."""
    folder: Path | None
    """Where the traces and configurations were kept; None: a temporary folder, removed after the run."""
    output_tail: str = ""
    note: str = ""
    """What went otherwise than a clean exit and was still read (a teardown abort), else empty."""

    @property
    def unfinished(self) -> list[int]:
        return [r for r in range(self.num_ranks) if r not in self.finish_ns]

    @property
    def step_s(self) -> float:
        """The last rank's finish, s."""
        return max(self.finish_ns.values(), default=0) / 1e9

    def check(self) -> AstraRun:
        """Self, or an AstraSimError naming the ranks that never finished."""
        missing = self.unfinished
        if missing:
            shown = ", ".join(map(str, missing[:12])) + (f" ... ({len(missing)} ranks)" if len(missing) > 12 else "")
            where = f"traces in {self.folder}" if self.folder else "--out DIR keeps the traces"
            raise AstraSimError(f"ASTRA-sim ended without finishing ranks {shown} of {self.num_ranks} (a receive "
                                f"without its send, or a collective not all of its group reach); {where}; its "
                                f"output ends: {self.output_tail[-300:]!r}")
        return self


def check_graphs(graphs: list[RankGraph]) -> int:
    """The rank count; a ValueError where ASTRA-sim could not run the graphs to their end: a rank without its
    graph, a collective without its communicator's group, a send without its receive (count and bytes)."""
    num_ranks = max(g.num_ranks for g in graphs)
    missing = sorted(set(range(num_ranks)) - {g.rank for g in graphs})
    if missing:
        raise ValueError(f"ASTRA-sim simulates every rank of the network: ranks {missing[:8]} of {num_ranks} have "
                         f"no graph; export every rank")
    posted: dict[tuple[int, int], list[list[int]]] = {}
    for g in graphs:
        for op in g.ops:
            if op.kind == "comm" and op.collective in ("send", "recv"):
                pair = (g.rank, op.peer) if op.collective == "send" else (op.peer, g.rank)
                posted.setdefault(pair, [[], []])[op.collective == "recv"].append(max(int(op.size_bytes), 1))
            elif op.kind == "comm" and op.communicator not in (g.communicators or {}):
                raise ValueError(f"rank {g.rank}: {op.name} runs on communicator {op.communicator!r}, which the "
                                 f"graph gives no group of ranks; ASTRA-sim needs every collective's group")
    for (src, dst), (sends, recvs) in sorted(posted.items()):
        if sends != recvs:
            raise ValueError(f"rank {src} posts sends of {sends[:4]} bytes to rank {dst}, which posts receives of "
                             f"{recvs[:4]} bytes: ASTRA-sim pairs them in order and would wait forever")
    num_groups = len(group_ids(graphs))
    if num_groups > MAX_GROUPS:
        raise ValueError(f"{num_groups} communicator groups: ASTRA-sim numbers a group's streams from its id x "
                         f"1,000,000 in an int (system/CommunicatorGroup.cc), at most {MAX_GROUPS} groups; "
                         f"export a smaller job")
    return num_ranks


def run_graphs_in_astra(graphs: list[RankGraph], cluster: ClusterModel, binary: Path, *, timeout_s: float,
                        folder: Path | None = None, peak_flops: float | None = None) -> AstraRun:
    """Run `graphs` (every rank's) in ASTRA-sim on `cluster`, compute replayed from the graphs' durations (or,
    given `peak_flops`, costed by ASTRA-sim's roofline at that rate and the GPU's memory bandwidth); files
    go to `folder` (default: a new temporary folder, removed however the run ends)."""
    num_ranks = check_graphs(graphs)
    dims = network_config(cluster, num_ranks)  # a network ASTRA-sim cannot build is refused before any file
    temporary = folder is None
    folder = _folder(folder)
    try:
        return _run_in(folder, graphs, cluster, binary, num_ranks=num_ranks, dims=dims, timeout_s=timeout_s,
                       peak_flops=peak_flops, kept=not temporary)
    finally:
        if temporary:  # ~4 MB of traces a run: a failed or interrupted one left them too
            shutil.rmtree(folder, ignore_errors=True)


def _run_in(folder: Path, graphs: list[RankGraph], cluster: ClusterModel, binary: Path, *, num_ranks: int, dims,
            timeout_s: float, peak_flops: float | None, kept: bool) -> AstraRun:
    """`run_graphs_in_astra` in `folder`; the binary and all it starts run as one process group, ended when
    the run ends (`bench/process_group.py`)."""
    prefix = folder / "trace"
    per_server = dims[0].npus if len(dims) > 1 else num_ranks
    write_et(graphs, prefix, ring_order=lambda members: snake_ring(members, per_server))
    files = write_configs(folder, cluster, num_ranks, roofline=peak_flops is not None, peak_flops=peak_flops or 0.0)
    argv = [str(binary), f"--workload-configuration={prefix}", f"--system-configuration={files.system}",
            f"--network-configuration={files.network}", f"--remote-memory-configuration={files.memory}"]
    if comm_groups_path(prefix).exists():
        argv.append(f"--comm-group-configuration={comm_groups_path(prefix)}")
    # Into a file its log is block-buffered, and the crash at its end (below) loses what was not flushed: a
    # rank's finished line, at random with the buffer's boundary. Line-buffered (coreutils' stdbuf), every
    # line printed is kept.
    if shutil.which("stdbuf") and os.access(binary, os.X_OK):  # (a missing binary: the OSError below)
        argv = ["stdbuf", "-oL", "-eL", *argv]
    where = f"traces in {folder}" if kept else "--out DIR keeps the traces"
    start = time.perf_counter()
    out_path, err_path = folder / "astra-sim.stdout", folder / "astra-sim.stderr"
    try:  # its logs go to ./log: run it in the folder
        with out_path.open("wb") as out, err_path.open("wb") as err, \
                own_group(argv, cwd=folder, stdin=subprocess.DEVNULL, stdout=out, stderr=err) as proc:
            code = wait_for(proc, timeout_s)
    except OSError as exc:
        raise AstraSimError(f"ASTRA-sim did not start ({exc}); {HINT}") from None
    if code is None:
        raise AstraSimError(f"ASTRA-sim ran past {timeout_s:g} s on {num_ranks} ranks and was stopped, with all "
                            f"it started; {where}")
    wall_s = time.perf_counter() - start
    stdout = out_path.read_bytes().decode(errors="replace")
    output = stdout + err_path.read_bytes().decode(errors="replace")
    finish = {int(r): int(c) for r, c in FINISHED.findall(stdout)}
    # The shipped build crashes at its end (SIGABRT from glibc's "malloc_consolidate(): unaligned fastbin chunk",
    # or SIGSEGV) on one network dimension of more than 8 NPUs, e.g. an NVL72 domain of 16 GPUs, after every rank
    # has printed its finished line (the same cycles on every try): those runs are read, and say so; a crash
    # that leaves a rank unfinished, or any other failure, is one.
    teardown = code in (-6, -11) and len(finish) == num_ranks
    if code != 0 and not teardown:
        raise AstraSimError(f"ASTRA-sim exited with {code} ({where}): {output.strip()[-600:]}")
    note = (f"ASTRA-sim crashed at its end (signal {-code}) after every rank finished; its finished "
            f"lines are read" if teardown else "")
    return AstraRun(finish_ns=finish, num_ranks=num_ranks, wall_s=wall_s, folder=folder if kept else None,
                    output_tail=output[-2000:], note=note)


def _folder(folder: Path | None) -> Path:
    # ASTRA-sim reads no communicator groups from a path holding "empty" (Workload.cc initialize_comm_groups)
    if folder is None:
        while "empty" in str(folder := Path(tempfile.mkdtemp(prefix="fabriclab-astra-"))):
            pass
        return folder
    if "empty" in str(folder.resolve()):
        raise ValueError(f"{folder}: ASTRA-sim ignores a communicator-group file whose path holds 'empty'; "
                         f"choose another folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ---- single collectives ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class CollectiveCase:
    """One collective on one group of ranks."""

    collective: str
    """allreduce, allgather, reduce_scatter, alltoall, or sendrecv (a send from ranks[0] to ranks[1])."""
    ranks: tuple[int, ...]
    size_bytes: int
    """nccl-tests' convention (the gathered output of an all-gather, ...)."""
    notes: tuple[str, ...] = field(default=(), compare=False)


def case_graphs(case: CollectiveCase, num_ranks: int) -> list[RankGraph]:
    """Every rank's graph: the collective on its ranks, a 0-s compute op elsewhere (ASTRA-sim's feeder
    refuses a trace without nodes: chakra src/feeder_v3/dependancy_solver.cpp)."""
    group = sorted(case.ranks)
    graphs = []
    for r in range(num_ranks):
        if r in case.ranks and case.collective == "sendrecv":
            send = r == case.ranks[0]
            op = Op(id=0, name=case.collective, kind="comm", collective="send" if send else "recv",
                    communicator="case", size_bytes=case.size_bytes, group_size=2,
                    peer=case.ranks[1] if send else case.ranks[0])
        elif r in case.ranks:
            op = Op(id=0, name=case.collective, kind="comm", collective=case.collective, communicator="case",
                    size_bytes=case.size_bytes, group_size=len(group), stream="comm")
        else:
            op = Op(id=0, name="idle", kind="compute")
        graphs.append(RankGraph(rank=r, num_ranks=num_ranks, ops=(op,),
                                communicators={"case": group} if r in case.ranks else {}))
    return graphs


def collective_seconds(cases: list[CollectiveCase], cluster: ClusterModel, num_ranks: int, binary: Path, *,
                       timeout_s: float) -> tuple[dict[CollectiveCase, float], float]:
    """Each case's time in ASTRA-sim (the last of its ranks to finish), one run per case on the network of
    `num_ranks` GPUs of `cluster`; and the runs' summed wall time."""
    times, wall = {}, 0.0
    for case in dict.fromkeys(cases):  # each in a temporary folder, removed however the run ends
        run = run_graphs_in_astra(case_graphs(case, num_ranks), cluster, binary, timeout_s=timeout_s).check()
        times[case] = max(run.finish_ns[r] for r in case.ranks) / 1e9
        wall += run.wall_s
    return times, wall
