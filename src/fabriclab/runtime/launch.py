"""Start ranks and join them into one process group: local processes, or an existing cluster launch.

`launch(fn, args, config=...)` runs `fn(ctx, *args)` on every rank, where `ctx` is a `RankContext` (rank,
world size, process group, store). Without a launcher in the environment it spawns `config.num_ranks`
local processes (TCP store on a free loopback port, hosted by the parent); under torchrun,
Slurm `srun`, Open MPI `mpirun` or an MPICH/PMI launcher (`fabriclab.runtime.environment.detect_launch`)
it joins the existing launch. `config.device` puts each rank on the CPU or on the GPU of its local rank,
and the backend follows the device unless given (`fabriclab.runtime.devices`: NCCL needs a GPU per rank,
Gloo lets ranks share one); both are checked before any rank starts. Every rank's context carries the
launch's placement (launcher, hosts, ranks, GPUs), which `LaunchOutcome.placement` hands to the record.

Failure is bounded and named, never a hang:
* Rendezvous: each rank announces itself in the store and waits at most `timeout_s` for the others, then
  fails with `rank 3 never arrived within 60 s`.
* Collectives time out after `timeout_s` (the process group's timeout). A rank that fails, in a collective
  or otherwise, then reads the per-rank heartbeat counters and progress marks (`ctx.mark`) kept in the store
  and says which peers stopped beating (dead or stopped) or did not reach the current step
  (`fabriclab.runtime.health`).
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
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist

from fabriclab.runtime.devices import (check_devices, check_one_gpu_per_rank, group_backend, placement, rank_device,
                                       rank_facts)
from fabriclab.runtime.environment import LOOPBACK, LaunchError, Rendezvous, detect_launch, resolve_backend
from fabriclab.runtime.health import Heartbeat, arrive, diagnose, first_line, missing_ranks, settle

_PREFIX = "fabriclab"  # every store key of a launch lives under it
# Time a local rank may take to start (interpreter, torch import) before the rendezvous clock runs;
# measured ~2 s per rank on an idle 2-core machine, so 60 s leaves room for a loaded one.
STARTUP_S = 60.0
# After a first failure, how long the parent collects other ranks' reports before it kills the rest.
GRACE_S = 0.5
# How long the parent waits for a child after SIGTERM, and again after SIGKILL, before it stops waiting.
TERM_WAIT_S = 2.0
KILL_WAIT_S = 5.0


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """How to start or join the ranks."""

    num_ranks: int = 1
    """Local ranks to spawn; ignored when joining an existing launch (its world size rules)."""
    device: str = "cpu"
    """Where the ranks' tensors live: cpu, or cuda (each rank on the GPU of its local rank)."""
    backend: str | None = None
    """torch.distributed backend: gloo, nccl (CUDA, one GPU per rank) or mpi where torch was built with
    it; None follows the device (nccl on cuda, gloo on cpu)."""
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
        resolve_backend(self.device, self.backend)

    @property
    def resolved_backend(self) -> str:
        """The backend the ranks use: `backend`, or the device's default."""
        return resolve_backend(self.device, self.backend)


@dataclass(eq=False)
class RankContext:
    """What `fn(ctx, *args)` gets on every rank."""

    rank: int
    """This rank, 0..world_size-1."""
    world_size: int
    """Number of ranks."""
    local_rank: int
    """Rank among the processes on this host."""
    group: Any
    """The process group of all ranks (torch.distributed's default group)."""
    device: torch.device
    """Where this rank's tensors live: cpu, or cuda:<local_rank> (`runtime.devices.rank_device`)."""
    timeout_s: float
    """The launch's timeout (`LaunchConfig.timeout_s`)."""
    store: Any
    """The rendezvous store (keys under `fabriclab/`), for small out-of-band data."""
    _report: Callable[[Any], None] = field(repr=False, default=lambda payload: None)
    step: int = 0
    """Number of `mark` calls so far."""
    label: str = ""
    """Label of the last `mark`."""
    backend: str = "gloo"
    """The launch's backend (gloo, nccl or mpi)."""
    placement: dict = field(default_factory=dict)
    """Where every rank runs (`runtime.devices.placement`): launcher, hosts, ranks, GPUs."""

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
    external: Rendezvous | None
    """The launch that was joined, or None for a local spawn."""
    placement: dict | None = None
    """Where the ranks ran (`RankContext.placement`), for the run's record."""

    @property
    def is_reporter(self) -> bool:
        """True in the one process that should print: the local parent, or rank 0 of a joined launch."""
        return self.external is None or self.external.rank == 0


def launch(fn: Callable, args: tuple = (), *, config: LaunchConfig,
           on_message: Callable[[int, Any], None] | None = None) -> LaunchOutcome:
    """Join the launch found in the environment, or spawn `config.num_ranks` local ranks."""
    external = detect_launch()
    # Before any rank starts: CUDA present, one GPU per rank of this host under NCCL, MPI built in. A
    # cluster launcher that shows each task one GPU (srun --gpus-per-task=1) is checked after the
    # rendezvous instead, by the GPUs' identities (`check_one_gpu_per_rank`).
    local = config.num_ranks
    if external is not None:
        one_visible = config.device == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() == 1
        local = None if one_visible else external.local_world_size
    check_devices(config.device, config.backend, local)
    if external is not None:
        out: list = []
        result = join(fn, args, launch=external, config=config, on_message=on_message, placement_out=out)
        return LaunchOutcome(results={external.rank: result}, external=external, placement=out[0] if out else None)
    inbox = _spawn(fn, args, config, on_message)
    return LaunchOutcome(results=inbox.results, external=None, placement=inbox.placement)


def spawn(fn: Callable, args: tuple = (), *, config: LaunchConfig,
          on_message: Callable[[int, Any], None] | None = None) -> dict[int, Any]:
    """Run `fn(ctx, *args)` on `config.num_ranks` local processes; returns rank -> result.

    Raises `LaunchError` naming the rank(s) at fault when any rank fails, dies or never arrives."""
    return _spawn(fn, args, config, on_message).results


def _spawn(fn: Callable, args: tuple, config: LaunchConfig, on_message) -> "_Inbox":
    # c10d logs every failed socket with a C++ backtrace; our errors say more in one line.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    raw = _host_store(config.timeout_s)
    ctx = mp.get_context(config.start_method)
    if config.start_method == "forkserver":
        ctx.set_forkserver_preload(["torch", "torch.distributed", "fabriclab.runtime.launch"])
    procs = []
    inbox = _Inbox(on_message)
    try:
        for rank in range(config.num_ranks):
            reader, writer = ctx.Pipe(duplex=False)
            place = Rendezvous(kind="local", rank=rank, world_size=config.num_ranks, local_rank=rank,
                               master_addr=LOOPBACK, master_port=raw.port, hosts_store=False)
            proc = ctx.Process(target=_child_main, name=f"fabriclab-rank-{rank}",
                               args=(fn, args, place, config, writer, os.getpid()))
            proc.start()
            writer.close()
            procs.append(proc)
            inbox.conns[reader] = rank
        _watch(procs, inbox, dist.PrefixStore(_PREFIX, raw), config.timeout_s)
    finally:
        _stop_all(procs)
    if inbox.failures:
        raise LaunchError(_summary(inbox.failures),
                          ranks=sorted({r for _, _, blamed in inbox.failures for r in blamed}))
    return inbox


def join(fn: Callable, args: tuple = (), *, launch: Rendezvous, config: LaunchConfig,
         on_message: Callable[[int, Any], None] | None = None, placement_out: list | None = None) -> Any:
    """Run `fn` as this process's rank of an existing launch; rank 0 hosts the store (or the agent's).
    The launch's placement is appended to `placement_out` when given."""

    def report(payload: Any) -> None:
        if on_message is not None:
            on_message(launch.rank, payload)

    result, where = _run_rank(fn, args, launch, config, report)
    if placement_out is not None:
        placement_out.append(where)
    return result


@dataclass(eq=False)
class _Inbox:
    """What the ranks of a local spawn sent back over their pipes, as the parent has read it so far."""

    on_message: Callable[[int, Any], None] | None
    """Called with (rank, payload) for every `ctx.report`."""
    conns: dict = field(default_factory=dict)
    """Pipe end -> rank, for the pipes still open."""
    results: dict[int, Any] = field(default_factory=dict)
    """rank -> return value of `fn`."""
    failures: list[tuple[int, str, tuple[int, ...]]] = field(default_factory=list)
    """(rank, message, ranks at fault) in the order they were seen."""
    placement: dict | None = None
    """Where the ranks ran, as rank 0 sent it."""

    def read(self, conn) -> None:
        """Everything waiting in one rank's pipe; forget the pipe once it is closed."""
        rank = self.conns[conn]
        try:
            while conn.poll():
                kind, payload = conn.recv()
                if kind == "result":
                    self.results[rank] = payload
                elif kind == "placement":
                    self.placement = payload
                elif kind == "error":
                    self.failures.append((rank, *payload))
                elif self.on_message is not None:
                    self.on_message(rank, payload)
        except (EOFError, OSError):
            del self.conns[conn]

    def has_failed(self, rank: int) -> bool:
        return any(r == rank for r, _, _ in self.failures)


def _watch(procs, inbox: _Inbox, store, timeout_s: float) -> None:
    """Read the pipes until every child has exited, or until `GRACE_S` after the first failure."""
    by_sentinel = {p.sentinel: r for r, p in enumerate(procs)}
    live = set(by_sentinel)
    rendezvous_deadline = time.monotonic() + STARTUP_S + timeout_s
    give_up_at = None
    while live and (give_up_at is None or time.monotonic() < give_up_at):
        ready = mp.connection.wait(list(inbox.conns) + list(live), timeout=0.2)
        for obj in ready:
            if obj in inbox.conns:
                inbox.read(obj)
        for obj in ready:
            if obj in live:
                rank = by_sentinel[obj]
                live.discard(obj)
                for conn in [c for c, r in inbox.conns.items() if r == rank]:
                    inbox.read(conn)  # a result may still be in the pipe
                code = procs[rank].exitcode
                if rank not in inbox.results and not inbox.has_failed(rank):
                    inbox.failures.insert(0, (rank, f"rank {rank} exited with code {code}{_signal_name(code)}",
                                              (rank,)))
        if len(inbox.results) < len(procs) and not inbox.failures and time.monotonic() > rendezvous_deadline:
            inbox.failures.extend((r, f"rank {r} never arrived within {STARTUP_S + timeout_s:g} s of its start",
                                   (r,)) for r in missing_ranks(store, len(procs)))
        if inbox.failures and give_up_at is None:
            give_up_at = time.monotonic() + GRACE_S


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
    """SIGTERM every live child, then SIGKILL what is left after `TERM_WAIT_S`; reap them all."""
    for proc in procs:
        if proc.exitcode is None:
            proc.terminate()
    deadline = time.monotonic() + TERM_WAIT_S
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.exitcode is None:
            proc.kill()
            proc.join(KILL_WAIT_S)  # SIGKILL cannot be caught: only a process stuck in the kernel stays


def _host_store(timeout_s: float):
    """The parent's TCP store on a free loopback port (it outlives any rank, so it can tell who died)."""
    return dist.TCPStore(LOOPBACK, 0, None, True, timedelta(seconds=timeout_s), wait_for_workers=False)


def _child_main(fn, args, place: Rendezvous, config: LaunchConfig, conn, parent_pid: int) -> None:
    # Ctrl-C reaches the whole process group; the parent decides and kills us, so a rank never
    # dies half-way through a collective on its own and leaves the others guessing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent_pid)
    code = 0
    try:
        result, where = _run_rank(fn, args, place, config, lambda payload: conn.send(("message", payload)))
        if place.rank == 0:
            conn.send(("placement", where))
        conn.send(("result", result))
    except BaseException as exc:  # every failure must reach the parent as one readable line
        if isinstance(exc, LaunchError):
            message = (str(exc), exc.ranks)
        else:
            message = (f"rank {place.rank} failed: {type(exc).__name__}: {first_line(exc)}", (place.rank,))
        try:
            conn.send(("error", message))
        except OSError:  # the parent is gone (SIGKILL, say): nobody to tell, and no traceback to print
            pass
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


def _run_rank(fn, args, place: Rendezvous, config: LaunchConfig,
              report: Callable[[Any], None]) -> tuple[Any, dict]:
    """Meet the other ranks at `place`'s store, run `fn` there, and turn a failure into a `LaunchError`;
    returns `fn`'s result and the launch's placement."""
    if config.threads_per_rank is not None:
        torch.set_num_threads(config.threads_per_rank)
    rank, world_size, timeout = place.rank, place.world_size, timedelta(seconds=config.timeout_s)
    host, port = place.master_addr, place.master_port
    try:
        raw = dist.TCPStore(host, port, None, place.hosts_store, timeout, wait_for_workers=False)
    except RuntimeError as exc:
        raise LaunchError(f"rank {rank} could not reach the rendezvous store at {host}:{port} within "
                          f"{config.timeout_s:g} s ({first_line(exc)}): its host (rank 0) never arrived "
                          f"or cannot be reached", ranks=[0]) from None
    prefix = f"{_PREFIX}/{place.store_prefix}" if place.store_prefix else _PREFIX
    store = dist.PrefixStore(prefix, raw)
    beat = Heartbeat(dist.PrefixStore(prefix, raw.clone()), rank, config.timeout_s)
    beat.start()
    ctx = None
    try:
        arrive(store, rank, world_size, config.timeout_s)
        backend = config.resolved_backend
        device = rank_device(config.device, backend, place.local_rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)  # before the group: NCCL binds its communicators to it
        dist.init_process_group(group_backend(backend), store=dist.PrefixStore(f"{prefix}/pg", raw), rank=rank,
                                world_size=world_size, timeout=timeout)
        facts: list = [None] * world_size
        dist.all_gather_object(facts, rank_facts(place.local_rank, device))  # over Gloo, also under NCCL
        where = placement(place.kind, backend, facts)
        if backend == "nccl":
            check_one_gpu_per_rank(facts)
            # NCCL builds a group's communicator at its first collective; a first call that is a batch of
            # point-to-point ops must include every rank (torch.distributed.batch_isend_irecv), which a
            # schedule's first step need not: build it here, with every rank.
            dist.all_reduce(torch.zeros(1, device=device))
        ctx = RankContext(rank=rank, world_size=world_size, local_rank=place.local_rank, group=dist.group.WORLD,
                          device=device, timeout_s=config.timeout_s, store=store, _report=report,
                          backend=backend, placement=where)
        result = fn(ctx, *args)
    except Exception as exc:
        error = exc if isinstance(exc, LaunchError) else diagnose(store, rank, world_size, ctx, exc,
                                                                   beat.interval_s)
        if place.hosts_store:  # the other ranks need the store a little longer to find out who is at fault
            settle(store, world_size, config.timeout_s + 5 * beat.interval_s, beat.interval_s)
        raise error from (None if error is exc else exc)
    finally:
        beat.stop()
    store.set(f"done/{rank}", "1")
    if place.hosts_store:
        settle(store, world_size, config.timeout_s, beat.interval_s)
    dist.destroy_process_group()
    return result, where
