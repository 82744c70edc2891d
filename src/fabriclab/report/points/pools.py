"""Where points run: this process, a local process pool, or an existing Dask distributed cluster.

Every pool runs *chunks*: lists of (index, point) that `run_chunk` evaluates with the same function and
context, answering (index, result as JSON text). The context travels pickled as bytes (on Dask: one task
whose result each worker fetches once, remade if lost with its worker) and is unpickled once per process
(`_CONTEXTS`). Results are JSON text on every path (the same bytes whichever pool ran them,
and what the store keeps).

* `LocalPool(workers=1)` runs in this process; `workers > 1` starts a `concurrent.futures` process pool.
* `DaskPool(address)` is a client of a running Dask scheduler (`dask scheduler`, `dask worker ADDRESS`, or
  dask-jobqueue on Slurm): chunks are tasks; a worker that dies mid-chunk has it re-run on another
  (Dask's own retry of tasks lost with their worker), we never run our own scheduler.

Every wait has a limit: connecting (`CONNECT_TIMEOUT_S`), the first worker (`WORKERS_TIMEOUT_S`), and
`stall_s` with no chunk finishing (then a ValueError says so).

Try it: `dask scheduler --port 8786 & dask worker tcp://127.0.0.1:8786 --nthreads 1 --nworkers 2 &
fabriclab plan --model resnet50 --scheduler tcp://127.0.0.1:8786`.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
import uuid
from typing import Callable, Iterator

CONNECT_TIMEOUT_S = 30.0
WORKERS_TIMEOUT_S = 120.0
TERM_WAIT_S = 2.0  # after SIGTERM, how long a pool process may take to exit before SIGKILL
DEFAULT_STALL_S = 3600.0  # a fatness point at 16,384 hosts takes minutes; an hour with nothing done is a hang
_CONTEXTS: dict[str, object] = {}  # digest -> unpickled context, per process


def to_json(value) -> str:
    """A result as JSON text (NaN kept as NaN, numpy scalars as numbers, tuples as lists)."""
    return json.dumps(value, separators=(",", ":"), default=_plain)


def _plain(value):
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    raise TypeError(f"a point's result holds {type(value).__name__}: return JSON types (dicts, lists, numbers, "
                    f"strings)")


def pack(context) -> tuple[str, bytes]:
    """(digest, pickled bytes) of a run's context."""
    blob = pickle.dumps(context, protocol=pickle.HIGHEST_PROTOCOL)
    return hashlib.blake2b(blob, digest_size=16).hexdigest(), blob


def run_chunk(fn: Callable, digest: str, blob: bytes, chunk: list) -> list[tuple[int, str]]:
    """Evaluate `fn(context, point)` for each (index, point) of `chunk`; (index, JSON text) each."""
    if digest not in _CONTEXTS:
        _CONTEXTS.clear()  # one run at a time per process: keep memory bounded
        _CONTEXTS[digest] = pickle.loads(blob)
    context = _CONTEXTS[digest]
    return [(i, to_json(fn(context, point))) for i, point in chunk]


class LocalPool:
    """This process (`workers=1`) or a pool of `workers` processes on this machine."""

    def __init__(self, workers: int = 1, *, stall_s: float = DEFAULT_STALL_S) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"--processes {workers!r}: give a whole number >= 1 (processes on this machine)")
        self.workers, self.stall_s = workers, stall_s
        self._pool = None
        self._workers: set = set()  # the pool's processes (multiprocessing.Process)
        self._others: set = set()  # this process's children that are not the pool's
        self.where = "this process" if workers == 1 else f"{workers} local processes"

    @property
    def slots(self) -> int:
        """Points that run at once."""
        return self.workers

    def run(self, fn: Callable, digest: str, blob: bytes, chunks: list[list]) -> Iterator[list]:
        """Each chunk's answers as it finishes (any order)."""
        if self.workers == 1:
            for chunk in chunks:
                yield run_chunk(fn, digest, blob, chunk)
            return
        import concurrent.futures as cf
        import multiprocessing
        from concurrent.futures.process import BrokenProcessPool

        if self._pool is None:  # forkserver: no fork of a process that holds threads (rich, sqlite)
            self._others = set(multiprocessing.active_children())
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("forkserver"))
        pending = {self._pool.submit(run_chunk, fn, digest, blob, c) for c in chunks}
        # The pool's processes (started by the submits), so that `close(abort=True)` can end them at once:
        # concurrent.futures has no public way to before Python 3.14 (`terminate_workers`).
        self._workers |= set(multiprocessing.active_children()) - self._others
        while pending:
            done, pending = cf.wait(pending, timeout=self.stall_s, return_when=cf.FIRST_COMPLETED)
            if not done:
                raise ValueError(f"no point finished in {self.stall_s:g} s on {self.where}: a point hangs")
            for future in done:
                try:
                    answers = future.result()
                except BrokenProcessPool:
                    raise ValueError(f"a process of {self.where} died (out of memory? killed?): rerun with "
                                     f"--resume, with fewer --processes") from None
                yield answers

    def close(self, *, abort: bool = False) -> None:
        """Stop the processes (work not started is dropped); forget the context kept here.

        `abort` (an error, Ctrl-C or SIGTERM stopped the run): end the points running now too, instead of
        waiting for them; SIGTERM reaches only this process, not the pool's, which would run on."""
        _CONTEXTS.clear()
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if abort:
            end_processes(self._workers)
        self._workers = set()
        pool.shutdown(wait=True, cancel_futures=True)


def end_processes(procs, wait_s: float = TERM_WAIT_S) -> None:
    """SIGTERM each live process, SIGKILL those still alive after `wait_s`; reap them all."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + wait_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(wait_s)


class DaskPool:
    """A client of the Dask scheduler at `address` (module doc)."""

    def __init__(self, address: str, *, stall_s: float = DEFAULT_STALL_S) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise ValueError("--scheduler needs the Dask distributed package: pip install 'fabriclab[cluster]' "
                             "(or pip install distributed)") from None
        if "://" not in address:
            raise ValueError(f"--scheduler {address!r}: give the scheduler's address, e.g. tcp://10.0.0.1:8786 "
                             f"(what `dask scheduler` prints)")
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"cannot reach the Dask scheduler at {address} within {CONNECT_TIMEOUT_S:g} s "
                             f"({exc}): start it with `dask scheduler`, or check --scheduler / "
                             f"FABRICLAB_SCHEDULER") from None
        self.address, self.stall_s = address, stall_s
        self.where = f"dask {address}"
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError:
            self.close()
            raise ValueError(f"the Dask scheduler at {address} has no worker after {WORKERS_TIMEOUT_S:g} s: start "
                             f"some with `dask worker {address}`") from None

    @property
    def slots(self) -> int:
        """Threads of the cluster's workers now (at least 1)."""
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))

    def run(self, fn: Callable, digest: str, blob: bytes, chunks: list[list]) -> Iterator[list]:
        """Each chunk's answers as it finishes (any order); chunks of a dead worker run again elsewhere."""
        from distributed import wait

        if not chunks:
            return
        token = uuid.uuid4().hex[:16]
        # The context once, as a task of its own: each worker fetches it once, and one lost with its worker
        # is made again from the task (data scattered instead would be lost for good).
        context = self.client.submit(_same, blob, key=f"fabriclab-context-{token}", pure=False)
        futures = [self.client.submit(run_chunk, fn, digest, context, c, pure=False,
                                      key=f"fabriclab-{fn.__name__}-{token}-{k}") for k, c in enumerate(chunks)]
        pending = set(futures)
        try:
            while pending:
                with self.client.as_current():  # `wait` finds the client of the futures this way
                    done, pending = _wait_some(wait, pending, self.stall_s)
                if not done:
                    raise ValueError(f"no point finished in {self.stall_s:g} s on {self.where}: are its workers "
                                     f"alive (`dask` dashboard, worker logs)?")
                for future in done:
                    yield _answers(future)
        finally:
            if pending:
                self.client.cancel(list(pending))
            context.release()

    def close(self, *, abort: bool = False) -> None:
        """Disconnect (the cluster keeps running; `run` cancelled what it left pending, `abort` or not)."""
        self.client.close(timeout=CONNECT_TIMEOUT_S)


def _same(blob: bytes) -> bytes:
    return blob


def _answers(future) -> list:
    """A finished chunk's answers; a chunk that killed its workers again and again is a ValueError."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker as exc:
        raise ValueError(f"Dask gave up on a chunk of points after it lost the workers that ran it ({exc}): "
                         f"a point may need more memory than a worker has; rerun with --resume") from None


def _wait_some(wait, pending: set, timeout_s: float) -> tuple[set, set]:
    try:
        done, not_done = wait(list(pending), timeout=timeout_s, return_when="FIRST_COMPLETED")
    except TimeoutError:
        return set(), pending
    return set(done), set(not_done)


def make_pool(scheduler: str | None, workers: int = 1, *, stall_s: float = DEFAULT_STALL_S):
    """A DaskPool when a scheduler address is given, else a LocalPool of `workers` processes."""
    if scheduler:
        if workers != 1:
            raise ValueError(f"--processes counts local processes, but the points go to the Dask scheduler {scheduler} "
                             f"(--scheduler or FABRICLAB_SCHEDULER), whose workers run them: drop one of the two")
        return DaskPool(scheduler, stall_s=stall_s)
    return LocalPool(workers, stall_s=stall_s)
