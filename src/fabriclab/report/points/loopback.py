"""A Dask cluster on this machine's loopback: `dask scheduler` and `dask worker` processes, for the test and
the benchmark of `report/points` (a user starts a real one as docs/plan.md says).

Every process runs in its own session and is killed with its group on exit, whatever happened; every wait
is bounded (`START_TIMEOUT_S`). Workers run without a nanny, one thread each: killing a worker's process
is its death (nothing restarts it), the way a node is lost.

Try it: `python -c "from fabriclab.report.points.loopback import LoopbackCluster as L
with L(2) as c: print(c.address, c.workers)"`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import fabriclab

START_TIMEOUT_S = 60.0
SRC = Path(fabriclab.__file__).resolve().parent.parent  # workers import this fabriclab


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackCluster:
    """`num_workers` single-thread Dask workers and their scheduler on 127.0.0.1 (module doc)."""

    def __init__(self, num_workers: int = 2, *, log_dir: Path | None = None) -> None:
        self.num_workers = num_workers
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="fabriclab-dask-"))
        self.address = ""
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[str, subprocess.Popen] = {}
        """Worker address -> its process."""

    def __enter__(self) -> "LoopbackCluster":
        try:
            from distributed import Client
        except ImportError:
            raise ValueError("a Dask cluster needs the distributed package: pip install 'fabriclab[cluster]'") from None
        port = free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        try:
            self._start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], "scheduler")
            for k in range(self.num_workers):
                self._start(["worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                             "127.0.0.1", "--death-timeout", str(int(START_TIMEOUT_S))], f"worker-{k}")
            with Client(self.address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
                client.wait_for_workers(self.num_workers, timeout=START_TIMEOUT_S)
                pids = client.run(os.getpid)
        except BaseException:
            self.__exit__()
            raise
        by_pid = {p.pid: p for p in self.procs}
        self.workers = {address: by_pid[pid] for address, pid in pids.items()}
        return self

    def _start(self, argv: list[str], name: str) -> None:
        path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
        with (self.log_dir / f"{name}.log").open("w") as log:
            self.procs.append(subprocess.Popen([sys.executable, "-m", "dask", *argv], stdout=log,
                                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": path},
                                               start_new_session=True))

    def kill(self, address: str) -> None:
        """Kill the worker at `address` now (SIGKILL: no goodbye to the scheduler)."""
        proc = self.workers.pop(address)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=START_TIMEOUT_S)

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait(timeout=START_TIMEOUT_S)
        self.procs, self.workers = [], {}
