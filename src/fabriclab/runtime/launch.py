"""Start ranks and join them into one process group: local processes, or an existing cluster launch.

`launch(fn, args, config=...)` runs `fn(ctx, *args)` on every rank, where `ctx` is a `RankContext` (rank,
world size, process group, store). Without a launcher in the environment it spawns `config.num_ranks`
local processes on a Gloo group (TCP store on a free loopback port, hosted by the parent); under torchrun,
Slurm `srun`, Open MPI `mpirun` or an MPICH/PMI launcher (`detect_launch`) it joins the existing launch.

Failure is bounded and named, never a hang:
* Rendezvous: each rank announces itself in the store and waits at most `timeout_s` for the others, then
  fails with `rank 3 never arrived within 60 s`.
* Collectives time out after `timeout_s` (the process group's timeout). A rank that fails, in a collective
  or otherwise, then reads the per-rank heartbeat counters and progress marks (`ctx.mark`) kept in the store
  and says which peers stopped beating (dead or stopped) or did not reach the current step.
* The parent of a local spawn watches its children: when one exits abnormally it kills the others and
  reports `rank 2 exited with code -9 (SIGKILL)`; on Ctrl-C it kills them all. Children kill themselves
  when the parent disappears, so nothing is orphaned.

Results (`fn`'s return values) and `ctx.report(...)` messages come back to the parent over pipes.

Try it: `fabriclab collectives bench --np 4 --timeout 10`.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Mapping

import torch
import torch.distributed as dist

LOOPBACK = "127.0.0.1"
_PREFIX = "fabriclab"  # every store key of a launch lives under it
# Time a local rank may take to start (interpreter, torch import) before the rendezvous clock runs;
# measured ~2 s per rank on an idle 2-core machine, so 60 s leaves room for a loaded one.
STARTUP_S = 60.0
# After a first failure, how long the parent collects other ranks' reports before it kills the rest.
GRACE_S = 0.5


class LaunchError(RuntimeError):
    """A rank failed, died or never arrived; the message names it and `ranks` lists the ranks at fault."""

    def __init__(self, message: str, ranks: list[int] | tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.ranks = tuple(ranks)


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """How to start or join the ranks."""

    num_ranks: int = 1
    """Local ranks to spawn; ignored when joining an existing launch (its world size rules)."""
    backend: str = "gloo"
    """torch.distributed backend: gloo (CPU), nccl (CUDA) or mpi where torch was built with it."""
    timeout_s: float = 60.0
    """Longest wait for a missing peer, at rendezvous and in any collective, before failing."""
    threads_per_rank: int | None = 1
    """torch intra-op threads per rank; 1 keeps several ranks on a few cores from oversubscribing them."""
    start_method: str = "forkserver"
    """multiprocessing start method of local ranks: forkserver imports torch once, spawn per rank."""

    def __post_init__(self) -> None:
        if self.num_ranks < 1:
            raise ValueError(f"number of ranks must be >= 1, got {self.num_ranks}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout_s}")
        if self.threads_per_rank is not None and self.threads_per_rank < 1:
            raise ValueError(f"threads per rank must be >= 1, got {self.threads_per_rank}")
        if self.start_method not in ("forkserver", "spawn"):
            raise ValueError(f"start method {self.start_method!r}: use forkserver or spawn")


@dataclass(frozen=True, kw_only=True)
class ExternalLaunch:
    """A launch made by someone else (torchrun, Slurm, mpirun, PMI), as read from the environment."""

    kind: str
    """torchrun, slurm, openmpi or pmi."""
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    """Host of the rendezvous store (rank 0's host unless an agent hosts it)."""
    master_port: int
    hosts_store: bool
    """True when this process (rank 0) hosts the TCP store; False under torchrun's agent store."""


@dataclass(eq=False)
class RankContext:
    """What `fn(ctx, *args)` gets on every rank."""

    rank: int
    world_size: int
    local_rank: int
    group: Any
    """The process group of all ranks (torch.distributed's default group)."""
    device: torch.device
    """Where this rank's tensors live: cpu for gloo, cuda:<local_rank> for nccl."""
    timeout_s: float
    store: Any
    """The rendezvous store (keys under `fabriclab/`), for small out-of-band data."""
    _report: Callable[[Any], None] = field(repr=False, default=lambda payload: None)
    step: int = 0
    """Number of `mark` calls so far."""
    label: str = ""
    """Label of the last `mark`."""

    def mark(self, label: str) -> None:
        """Record that this rank reached the next step (one store round trip: call it outside timing).

        When a collective times out, ranks that did not reach the step are named in the error."""
        self.step += 1
        self.label = label
        self.store.set(f"mark/{self.rank}", f"{self.step} {label}")

    def report(self, payload: Any) -> None:
        """Send `payload` to the launching process now (`on_message(rank, payload)` there)."""
        self._report(payload)


@dataclass(frozen=True, kw_only=True)
class LaunchOutcome:
    """What `launch` returns in this process."""

    results: dict[int, Any]
    """rank -> return value of `fn`: every rank's after a local spawn, this rank's after a join."""
    external: ExternalLaunch | None
    """The launch that was joined, or None for a local spawn."""

    @property
    def is_reporter(self) -> bool:
        """True in the one process that should print: the local parent, or rank 0 of a joined launch."""
        return self.external is None or self.external.rank == 0


def launch(fn: Callable, args: tuple = (), *, config: LaunchConfig,
           on_message: Callable[[int, Any], None] | None = None) -> LaunchOutcome:
    """Join the launch found in the environment, or spawn `config.num_ranks` local ranks."""
    external = detect_launch()
    if external is not None:
        return LaunchOutcome(results={external.rank: join(fn, args, launch=external, config=config,
                                                          on_message=on_message)}, external=external)
    return LaunchOutcome(results=spawn(fn, args, config=config, on_message=on_message), external=None)


def spawn(fn: Callable, args: tuple = (), *, config: LaunchConfig,
          on_message: Callable[[int, Any], None] | None = None) -> dict[int, Any]:
    """Run `fn(ctx, *args)` on `config.num_ranks` local processes; returns rank -> result.

    Raises `LaunchError` naming the rank(s) at fault when any rank fails, dies or never arrives."""
    # c10d logs every failed socket with a C++ backtrace; our errors say more in one line.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    store = _host_store(config.timeout_s)
    ctx = mp.get_context(config.start_method)
    if config.start_method == "forkserver":
        ctx.set_forkserver_preload(["torch", "torch.distributed", "fabriclab.runtime.launch"])
    procs, conns = [], {}
    results: dict[int, Any] = {}
    failures: list[tuple[int, str, tuple[int, ...]]] = []  # (rank, message, ranks at fault) as seen
    try:
        for rank in range(config.num_ranks):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child_main, name=f"fabriclab-rank-{rank}",
                               args=(fn, args, rank, store.port, config, writer, os.getpid()))
            proc.start()
            writer.close()
            procs.append(proc)
            conns[reader] = rank
        _watch(procs, conns, store, config, results, failures, on_message)
    finally:
        _stop_all(procs)
    if failures:
        raise LaunchError(_summary(failures), ranks=sorted({r for _, _, blamed in failures for r in blamed}))
    return results


def join(fn: Callable, args: tuple = (), *, launch: ExternalLaunch, config: LaunchConfig,
         on_message: Callable[[int, Any], None] | None = None) -> Any:
    """Run `fn` as this process's rank of an existing launch; rank 0 hosts the store (or the agent's)."""

    def report(payload: Any) -> None:
        if on_message is not None:
            on_message(launch.rank, payload)

    return _run_rank(fn, args, rank=launch.rank, world_size=launch.world_size, local_rank=launch.local_rank,
                     host=launch.master_addr, port=launch.master_port, host_store=launch.hosts_store,
                     config=config, report=report)


def detect_launch(env: Mapping[str, str] | None = None) -> ExternalLaunch | None:
    """The launch this process belongs to, from its environment; None when started by hand."""
    env = os.environ if env is None else env
    master = env.get("MASTER_ADDR")
    agent_store = False
    if "RANK" in env and "WORLD_SIZE" in env:
        kind, rank, size, local = "torchrun", env["RANK"], env["WORLD_SIZE"], env.get("LOCAL_RANK", "0")
        agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        all_local = env.get("LOCAL_WORLD_SIZE") == size
    elif "OMPI_COMM_WORLD_RANK" in env:
        kind, rank, local = "openmpi", env["OMPI_COMM_WORLD_RANK"], env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
        size = env.get("OMPI_COMM_WORLD_SIZE", "")
        all_local = env.get("OMPI_COMM_WORLD_LOCAL_SIZE") == size
    elif "PMI_RANK" in env and "PMI_SIZE" in env:
        kind, rank, size, local = "pmi", env["PMI_RANK"], env["PMI_SIZE"], env.get("MPI_LOCALRANKID", "0")
        all_local = env.get("MPI_LOCALNRANKS") == size
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        # SLURM_STEP_ID: only `srun` tasks join; a batch script that runs `--np 4` spawns locally.
        kind, rank, size, local = "slurm", env["SLURM_PROCID"], env["SLURM_NTASKS"], env.get("SLURM_LOCALID", "0")
        all_local = False
        master = master or _first_host(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", ""))
    else:
        return None
    try:
        rank_i, size_i, local_i = int(rank), int(size), int(local)
        port = int(env.get("MASTER_PORT") or _default_port(env))
    except ValueError:
        raise ValueError(f"{kind} launch: rank {rank!r}, size {size!r}, local rank {local!r} and MASTER_PORT "
                         f"{env.get('MASTER_PORT')!r} must be whole numbers") from None
    if not master:
        if not all_local:
            raise ValueError(f"{kind} launch without MASTER_ADDR: set MASTER_ADDR to the host of rank 0")
        master = LOOPBACK
    if not 0 <= rank_i < size_i:
        raise ValueError(f"{kind} launch: rank {rank_i} is outside a world of {size_i} ranks")
    return ExternalLaunch(kind=kind, rank=rank_i, world_size=size_i, local_rank=local_i, master_addr=master,
                          master_port=port, hosts_store=rank_i == 0 and not agent_store)


def _default_port(env: Mapping[str, str]) -> int:
    # torchrun's default port, shifted per Slurm job so two jobs sharing a node do not collide.
    return 29500 + int(env.get("SLURM_JOB_ID", "0")) % 1000


def _first_host(nodelist: str) -> str:
    """First host of a Slurm node list: `node[07-09,12],gpu1` -> `node07`."""
    head, bracket, rest = nodelist.partition("[")
    if not bracket:
        return nodelist.split(",")[0].strip()
    first = rest.split("]")[0].split(",")[0].split("-")[0]
    return f"{head.split(',')[-1]}{first}"


def _watch(procs, conns, store, config, results, failures, on_message) -> None:
    by_sentinel = {p.sentinel: r for r, p in enumerate(procs)}
    live = set(by_sentinel)
    rendezvous_deadline = time.monotonic() + STARTUP_S + config.timeout_s
    give_up_at = None
    while live and (give_up_at is None or time.monotonic() < give_up_at):
        ready = mp.connection.wait(list(conns) + list(live), timeout=0.2)
        for obj in ready:
            if obj in conns:
                _read(obj, conns, results, failures, on_message)
        for obj in ready:
            if obj in live:
                rank = by_sentinel[obj]
                live.discard(obj)
                for conn in [c for c, r in conns.items() if r == rank]:
                    _read(conn, conns, results, failures, on_message)  # a result may still be in the pipe
                code = procs[rank].exitcode
                if rank not in results and not any(r == rank for r, _, _ in failures):
                    failures.insert(0, (rank, f"rank {rank} exited with code {code}{_signal_name(code)}",
                                        (rank,)))
        if len(results) < len(procs) and not failures and time.monotonic() > rendezvous_deadline:
            missing = _missing_ranks(store, len(procs))
            if missing:
                failures.extend((r, f"rank {r} never arrived within {STARTUP_S + config.timeout_s:g} s "
                                    f"of its start", (r,)) for r in missing)
        if failures and give_up_at is None:
            give_up_at = time.monotonic() + GRACE_S


def _read(conn, conns, results, failures, on_message) -> None:
    rank = conns[conn]
    try:
        while conn.poll():
            kind, payload = conn.recv()
            if kind == "result":
                results[rank] = payload
            elif kind == "error":
                failures.append((rank, *payload))
            elif on_message is not None:
                on_message(rank, payload)
    except (EOFError, OSError):
        del conns[conn]


def _summary(failures: list[tuple[int, str, tuple[int, ...]]]) -> str:
    """The root cause first (a rank that died beats the errors it caused), then one line per other rank."""
    exits = [f for f in failures if " exited with code " in f[1]]
    ordered = exits + [f for f in failures if f not in exits]
    first, rest = ordered[0][1], [msg.split("; ")[0] for _, msg, _ in ordered[1:]]
    return "\n".join([first] + [f"  also: {line}" for line in rest])


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f" ({signal.Signals(-code).name})"
        except ValueError:
            return ""
    return ""


def _stop_all(procs) -> None:
    """SIGTERM every live child, then SIGKILL what is left after 2 s; reap them all."""
    for proc in procs:
        if proc.exitcode is None:
            proc.terminate()
    deadline = time.monotonic() + 2.0
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.exitcode is None:
            proc.kill()
            proc.join()


def _host_store(timeout_s: float):
    """The parent's TCP store on a free loopback port (it outlives any rank, so it can tell who died)."""
    return dist.TCPStore(LOOPBACK, 0, None, True, timedelta(seconds=timeout_s), wait_for_workers=False)


def _missing_ranks(store, world_size: int) -> list[int]:
    return [r for r in range(world_size) if not store.check([f"{_PREFIX}/arrived/{r}"])]


def _child_main(fn, args, rank, port, config, conn, parent_pid) -> None:
    # Ctrl-C reaches the whole process group; the parent decides and kills us, so a rank never
    # dies half-way through a collective on its own and leaves the others guessing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent_pid)
    code = 0
    try:
        result = _run_rank(fn, args, rank=rank, world_size=config.num_ranks, local_rank=rank, host=LOOPBACK,
                           port=port, host_store=False, config=config,
                           report=lambda payload: conn.send(("message", payload)))
        conn.send(("result", result))
    except BaseException as exc:  # every failure must reach the parent as one readable line
        if isinstance(exc, LaunchError):
            conn.send(("error", (str(exc), exc.ranks)))
        else:
            conn.send(("error", (f"rank {rank} failed: {type(exc).__name__}: {_first_line(exc)}", (rank,))))
        code = 1
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a process group broken by a dead peer can block in its destructor.
    os._exit(code)


def _exit_with_parent(parent_pid: int) -> None:
    """Exit when the launching process is gone (killed with -9, say), so no rank is left orphaned."""
    start_ppid = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            if os.getppid() != start_ppid:
                os._exit(1)

    threading.Thread(target=watch, name="fabriclab-parent-watch", daemon=True).start()


def _run_rank(fn, args, *, rank, world_size, local_rank, host, port, host_store, config, report) -> Any:
    if config.threads_per_rank is not None:
        torch.set_num_threads(config.threads_per_rank)
    timeout = timedelta(seconds=config.timeout_s)
    try:
        raw = dist.TCPStore(host, port, None, host_store, timeout, wait_for_workers=False)
    except RuntimeError as exc:
        raise LaunchError(f"rank {rank} could not reach the rendezvous store at {host}:{port} within "
                          f"{config.timeout_s:g} s ({_first_line(exc)}): its host (rank 0) never arrived "
                          f"or cannot be reached", ranks=[0]) from None
    store = dist.PrefixStore(_PREFIX, raw)
    beat = _Heartbeat(dist.PrefixStore(_PREFIX, raw.clone()), rank, config.timeout_s)
    beat.start()
    ctx = None
    try:
        _arrive(store, rank, world_size, config.timeout_s)
        device = torch.device("cpu")
        if config.backend == "nccl":
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        dist.init_process_group(config.backend, store=dist.PrefixStore(f"{_PREFIX}/pg", raw), rank=rank,
                                world_size=world_size, timeout=timeout)
        ctx = RankContext(rank=rank, world_size=world_size, local_rank=local_rank, group=dist.group.WORLD,
                          device=device, timeout_s=config.timeout_s, store=store, _report=report)
        result = fn(ctx, *args)
    except Exception as exc:
        error = exc if isinstance(exc, LaunchError) else LaunchError(
            *_diagnose(store, rank, world_size, ctx, exc, beat.interval_s))
        if host_store:  # the other ranks need the store a little longer to find out who is at fault
            _settle(store, world_size, config.timeout_s + 5 * beat.interval_s, beat.interval_s)
        raise error from (None if error is exc else exc)
    finally:
        beat.stop()
    store.set(f"done/{rank}", "1")
    if host_store:
        _settle(store, world_size, config.timeout_s, beat.interval_s)
    dist.destroy_process_group()
    return result


def _arrive(store, rank: int, world_size: int, timeout_s: float) -> None:
    store.set(f"arrived/{rank}", "1")
    count = store.add("arrivals", 1)
    deadline = time.monotonic() + timeout_s
    while count < world_size:
        if time.monotonic() > deadline:
            missing = [r for r in range(world_size) if not store.check([f"arrived/{r}"])]
            message = f"{_ranks_text(missing)} never arrived within {timeout_s:g} s (rank {rank} waited)"
            store.set(f"failed/{rank}", message)
            raise LaunchError(message, ranks=missing)
        time.sleep(0.05)
        count = store.add("arrivals", 0)


def _settle(store, world_size: int, limit_s: float, interval_s: float) -> None:
    """Keep the store (hosted here) up until every rank that arrived has finished, failed or gone silent."""
    deadline = time.monotonic() + limit_s
    last_beat: dict[int, tuple[int, float]] = {}
    while time.monotonic() < deadline:
        try:
            pending = [r for r in range(world_size) if store.check([f"arrived/{r}"])
                       and not store.check([f"done/{r}"]) and not store.check([f"failed/{r}"])]
            now = time.monotonic()
            for r in pending:
                beat = store.add(f"beat/{r}", 0)
                if last_beat.get(r, (None, 0.0))[0] != beat:
                    last_beat[r] = (beat, now)
        except Exception:  # nothing left to keep alive for
            return
        if all(now - last_beat[r][1] > 3 * interval_s for r in pending):
            return
        time.sleep(0.05)


class _Heartbeat:
    """Bumps `beat/<rank>` in the store several times per timeout from a thread of its own.

    A blocked collective releases the GIL, so a live rank keeps beating; a dead or stopped one does not."""

    def __init__(self, store, rank: int, timeout_s: float) -> None:
        self.store, self.rank = store, rank
        self.interval_s = min(1.0, timeout_s / 10)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="fabriclab-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while True:
            try:
                self.store.add(f"beat/{self.rank}", 1)
            except Exception:  # the store is gone: the launch is over either way
                return
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        """Stop beating and wait (bounded) for the thread: a daemon thread still inside a store call when
        the interpreter shuts down is killed while unwinding C++ frames, which aborts the process."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5 * self.interval_s + 1.0)


def _diagnose(store, rank, world_size, ctx, exc, interval_s) -> tuple[str, list[int]]:
    """The error of a failed rank, naming the peers at fault: never arrived, silent (dead or stopped),
    behind (did not reach this rank's step) or stuck (alive at this step, but neither failed nor done
    while this rank timed out waiting); peers that failed as well are listed after them."""
    where = f" at step {ctx.step} ({ctx.label})" if ctx is not None and ctx.step else ""
    head = f"rank {rank} failed{where}: {type(exc).__name__}: {_first_line(exc)}"
    try:
        store.set(f"failed/{rank}", head)
        if not _is_comm_error(exc):
            return head, [rank]  # its own error: the peers are merely waiting for it
        before = [store.add(f"beat/{r}", 0) for r in range(world_size)]
        time.sleep(3 * interval_s)  # three beats: a live peer has bumped its counter by then
        after = [store.add(f"beat/{r}", 0) for r in range(world_size)]
        culprits, failed = [], []
        for r in range(world_size):
            if r == rank or store.check([f"done/{r}"]):
                continue
            if not store.check([f"arrived/{r}"]):
                culprits.append((r, f"rank {r} never arrived"))
            elif after[r] == before[r]:
                culprits.append((r, f"rank {r} stopped responding (no heartbeat for {3 * interval_s:.1f} s: "
                                    f"dead or stopped)"))
            elif store.check([f"failed/{r}"]):
                failed.append(r)
            elif ctx is not None and ctx.step:
                step, _, label = (store.get(f"mark/{r}").decode() if store.check([f"mark/{r}"])
                                  else "0 start").partition(" ")
                if int(step) < ctx.step:
                    note = f"rank {r} did not reach step {ctx.step} ({ctx.label}); it is at step {step} ({label})"
                else:
                    note = f"rank {r} is alive at step {step} ({label}) but never joined the collective"
                culprits.append((r, note))
            else:
                culprits.append((r, f"rank {r} is alive but neither failed nor finished"))
    except Exception:  # the store went away with its host
        return (f"{head}; the rendezvous store is unreachable, so the process hosting it (rank 0 or the "
                f"launching parent) is gone"), [0]
    notes = [note for _, note in culprits]
    if failed:
        notes.append(f"also failed: {_ranks_text(failed)}")
    if not culprits:
        notes.insert(0, "no peer is at fault" if failed else "every peer is alive and at the same step")
    return f"{head}; " + "; ".join(notes), [r for r, _ in culprits] or [rank]


def _is_comm_error(exc: BaseException) -> bool:
    """A failure of communication (timeout, closed connection) rather than of the rank's own code."""
    return isinstance(exc, dist.DistError) or (isinstance(exc, RuntimeError) and re.search(
        r"timed? ?out|timeout|connection|closed|peer|socket|broken pipe|reset", str(exc), re.I) is not None)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else repr(exc)
    # Gloo prefixes its messages with the C++ source location: `[.../unbound_buffer.cc:78] Timed out ...`.
    return re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", line)


def _ranks_text(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
