"""Run a plan's or a sweep's points, keep each in the results store as it finishes, resume from it.

A command below the CLI (the plan's `run_plan`, `run_llm_plan`, the what-if sweep ...) describes its work
as `fn(context, point)` over a list of points and takes a `run_points(fn, context, points)` that returns
the answers in point order. `PointRunner` is that callable for the CLI:

* **Where**: a `pools.LocalPool` (this process, or `--processes N` processes) or a `pools.DaskPool`
  (`--scheduler tcp://HOST:PORT` or `FABRICLAB_SCHEDULER`). The answers are JSON on every path, so the
  result is the same, byte for byte, whichever ran it.
* **Kept**: the client is the one writer; finished points go to the store's `points` table in batches
  (at most `FLUSH_EVERY_S` apart, one transaction each) under the run's key: a digest of the function's
  name, the pickled context and fabriclab's version. Ctrl-C or an error keeps every point finished so far
  (one last transaction) and says how to resume; a point is in the store whole or not at all.
* **Resumed**: with `resume=True` the points already stored under the same key are read back, not run.
* **Progress**: `progress.Progress` on stderr.

Try it: `fabriclab plan --model resnet50 --gpus 64,256,512 --processes 2`, Ctrl-C, then the same with `--resume`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

from fabriclab.report import store as results_store
from fabriclab.report.points.pools import make_pool, pack
from fabriclab.report.points.progress import Progress

FLUSH_EVERY_S = 1.0
FLUSH_POINTS = 500
MAX_CHUNK = 32  # points per task at most: bounded loss when a worker dies, progress that moves
CHUNKS_PER_SLOT = 8  # enough tasks that a fast worker takes more of them


@dataclass(frozen=True, kw_only=True)
class RunStats:
    """What the last run of a PointRunner did."""

    total: int
    """Points asked for."""
    resumed: int
    """Points read back from the store (`resume`)."""
    computed: int
    """Points run now."""
    stored: int
    """Points newly added to the store."""
    where: str
    """Which pool ran them."""
    wall_s: float
    """Seconds from start to the last answer."""


def run_key(fn: Callable, digest: str) -> str:
    """The key of a run's points: the function, the context's digest and fabriclab's version."""
    from fabriclab import __version__

    text = f"{fn.__module__}.{fn.__qualname__}|{digest}|{__version__}"
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def chunk_size(num_points: int, slots: int) -> int:
    """Points per task: about CHUNKS_PER_SLOT tasks per slot, 1 .. MAX_CHUNK."""
    return max(1, min(MAX_CHUNK, num_points // max(1, slots * CHUNKS_PER_SLOT)))


class PointRunner:
    """`run_points(fn, context, points)` for the CLI (module doc). `store=None`: the store is off."""

    def __init__(self, *, scheduler: str | None = None, workers: int = 1, resume: bool = False,
                 store: Path | None = None, what: str = "points", stream: TextIO | None = None,
                 show_progress: bool = True, on_progress: Callable[[int, int], None] | None = None,
                 on_answer: Callable[[int, object], None] | None = None) -> None:
        if resume and store is None:
            raise ValueError("--resume reads finished points from the results store, which is off "
                             "(FABRICLAB_STORE=off): pass --store PATH")
        self.scheduler, self.workers, self.resume, self.store = scheduler, workers, resume, store
        self.what, self.stream, self.show_progress = what, stream or sys.stderr, show_progress
        self.on_progress = on_progress  # (done, total) after each answer, for programs driving a run
        self.on_answer = on_answer  # (point index, answer) of each point run now, as it finishes
        self.pool = None
        self.stats: list[RunStats] = []

    def __enter__(self) -> "PointRunner":
        self.pool = make_pool(self.scheduler, self.workers)  # bad --scheduler: an error before any work
        return self

    def __exit__(self, kind, *exc) -> None:
        if self.pool is not None:
            self.pool.close(abort=kind is not None)  # stopped by an error, Ctrl-C or SIGTERM: end the workers now
            self.pool = None

    def __call__(self, fn: Callable, context, points: list) -> list:
        """The answers of `fn(context, p)` for every point, in point order (JSON types)."""
        if self.pool is None:
            with self:
                return self(fn, context, points)
        t0 = time.perf_counter()
        digest, blob = pack(context)
        key = run_key(fn, digest)
        point_keys = [repr(p) for p in points]
        if len(set(point_keys)) != len(point_keys):
            raise ValueError(f"{self.what}: two points are the same ({_first_twice(point_keys)}); each runs once")
        texts: list[str | None] = [None] * len(points)
        if self.resume:
            stored = results_store.stored_points(key, self.store)
            for i, k in enumerate(point_keys):
                texts[i] = stored.get(k)
        todo = [(i, p) for i, p in enumerate(points) if texts[i] is None]
        resumed = len(points) - len(todo)
        size = chunk_size(len(todo), self.pool.slots)
        chunks = [todo[j:j + size] for j in range(0, len(todo), size)]
        summary = self.scheduler is not None or self.workers > 1 or resumed > 0
        progress = Progress(self.what, len(points), resumed=resumed, where=self.pool.where, stream=self.stream,
                            summary=summary) if self.show_progress else None
        stored_now = self._run(fn, digest, blob, chunks, key, point_keys, texts, progress)
        if progress:
            progress.close()
        self.stats.append(RunStats(total=len(points), resumed=resumed, computed=len(todo), stored=stored_now,
                                   where=self.pool.where, wall_s=time.perf_counter() - t0))
        return [json.loads(t) for t in texts]

    def _run(self, fn, digest, blob, chunks, key, point_keys, texts, progress) -> int:
        """Run the chunks, fill `texts`, store as they finish; returns the points newly stored."""
        buffer, stored, last = [], 0, time.monotonic()
        done = sum(t is not None for t in texts)
        try:
            for answers in self.pool.run(fn, digest, blob, chunks):
                fresh = [(i, text) for i, text in answers if texts[i] is None]  # nothing counted twice
                for i, text in fresh:
                    texts[i] = text
                    if self.on_answer:
                        self.on_answer(i, json.loads(text))
                buffer += [(point_keys[i], text) for i, text in fresh]
                done += len(fresh)
                if progress:
                    progress.advance(len(fresh))
                if self.on_progress:
                    self.on_progress(done, len(texts))
                if len(buffer) >= FLUSH_POINTS or time.monotonic() - last >= FLUSH_EVERY_S:
                    stored += self._flush(key, buffer)
                    buffer, last = [], time.monotonic()
        except BaseException:
            kept = self._flush(key, buffer)  # what finished is kept (one transaction), then the error
            if self.store is not None:
                self.stream.write(f"\n{self.what}: stopped with {done:,} of {len(texts):,} done ({stored + kept:,} "
                                  f"added to the store now); run the same command with --resume to go on\n")
                self.stream.flush()
            raise
        missing = [point_keys[i] for i, t in enumerate(texts) if t is None]
        assert not missing, f"points without an answer: {missing[:3]}"
        return stored + self._flush(key, buffer)

    def _flush(self, key: str, buffer: list) -> int:
        if self.store is None or not buffer:
            return 0
        return results_store.add_points(key, buffer, self.store)


def _first_twice(keys: list[str]) -> str:
    seen = set()
    for k in keys:
        if k in seen:
            return k
        seen.add(k)
    return ""
