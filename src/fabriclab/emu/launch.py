"""Run one process per emulated host, inside its namespace, with the torchrun-style rendezvous environment.

`run_in_cluster(argv)` starts `ip netns exec flh<rank> argv...` for every rank with RANK, WORLD_SIZE,
LOCAL_RANK=0, LOCAL_WORLD_SIZE=1, MASTER_ADDR (host 0's address), MASTER_PORT, FABRICLAB_EMU_DILATION and
GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (the host's interface: Gloo would otherwise resolve the machine's
hostname to an address that does not exist inside the namespace). Every rank's output (stdout and stderr
merged) is passed line by line to `on_line` and kept in its `RankResult`.

`launcher="torchrun"` runs a real multi-node launch instead: one `torchrun` agent per host
(`--nnodes` hosts, `--node-rank` its index, `--nproc-per-node nproc_per_host`), meeting over the
emulated network by c10d rendezvous at host 0's address (host 0's agent hosts the rendezvous store,
`--rdzv-conf is_host=1`; every agent gives its own address with `--local-addr`, since inside a
namespace the machine's host name resolves to an address that does not exist there). torchrun then
sets RANK, LOCAL_RANK, MASTER_ADDR ... for its workers, exactly as on a cluster; a host's output
carries all its workers' lines.

Failure is bounded and named: when a rank exits non-zero the others get SIGTERM, then SIGKILL after
`GRACE_S`; past `timeout_s` all are killed; Ctrl-C kills all and re-raises. Each rank runs in its own
process group (so its children are killed with it) and is killed by the kernel if this process dies
(PR_SET_PDEATHSIG), and `emu down` kills whatever still lives in our namespaces.

`ping_hosts` probes every host from host 0 (ICMP); `hop_latency` turns the RTTs into a latency per link.

Try it: `sudo fabriclab emu run -- python -c "import os; print(os.environ['RANK'], os.environ['MASTER_ADDR'])"`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

import fabriclab.emu.netns as netns
from fabriclab.emu.state import ClusterState, load_state
from fabriclab.fabric.scenario import build_topology
from fabriclab.fabric.topology import Topology

DEFAULT_MASTER_PORT = 29500
LAUNCHERS = ("direct", "torchrun")
# Variables a launcher sets for its workers: left out of a torchrun agent's environment, so that
# nothing of this process's own launch (if any) leaks into the emulated one.
_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                "MASTER_PORT")
# How long ranks get to exit after SIGTERM before SIGKILL (a Python rank needs well under a second).
GRACE_S = 2.0
# Lines of output kept per rank.
KEEP_LINES = 10_000
# Exit code reported for a rank killed by the timeout, as timeout(1) does.
TIMEOUT_CODE = 124


@dataclass(frozen=True, kw_only=True)
class RankResult:
    """How one rank ended."""

    rank: int
    """The rank."""
    namespace: str
    """Namespace it ran in."""
    returncode: int
    """Exit code; negative: killed by that signal (Popen convention)."""
    status: str
    """ok, failed (exited non-zero by itself), killed (stopped after another rank failed) or timeout."""
    elapsed_s: float
    """Wall time from start to exit."""
    output: str
    """Its stdout and stderr, merged (the last KEEP_LINES lines)."""


def rank_env(state: ClusterState, rank: int, master_port: int = DEFAULT_MASTER_PORT,
             base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of `rank`: `base` (default os.environ) plus the rendezvous variables."""
    env = host_env(state, rank, base)
    env.update(RANK=str(rank), WORLD_SIZE=str(len(state.hosts)), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               GROUP_RANK=str(rank), MASTER_ADDR=state.hosts[0].ip, MASTER_PORT=str(master_port))
    return env


def host_env(state: ClusterState, index: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default os.environ) without launch variables, plus what every process on emulated host
    `index` needs: its name and address, the dilation, and its interface for Gloo, NCCL and TensorPipe."""
    host = state.hosts[index]
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in _LAUNCH_VARS and not k.startswith("TORCHELASTIC_")}
    env.update(FABRICLAB_EMU_DILATION=f"{state.dilation:g}", FABRICLAB_EMU_HOST=host.namespace,
               FABRICLAB_EMU_IP=host.ip, GLOO_SOCKET_IFNAME=host.iface, NCCL_SOCKET_IFNAME=host.iface,
               TP_SOCKET_IFNAME=host.iface, PYTHONUNBUFFERED="1")
    return env


def torchrun_argv(state: ClusterState, index: int, argv: Sequence[str], nproc_per_host: int,
                  master_port: int = DEFAULT_MASTER_PORT) -> list[str]:
    """The torchrun agent of emulated host `index`: c10d rendezvous at host 0, `argv` as its workers."""
    host = state.hosts[index]
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(state.hosts)),
            "--node-rank", str(index), "--nproc-per-node", str(nproc_per_host), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{state.hosts[0].ip}:{master_port}", "--rdzv-id", f"fabriclab-{os.getpid()}",
            "--rdzv-conf", f"is_host={int(index == 0)}", "--local-addr", host.ip, "--max-restarts", "0",
            # `--` ends torchrun's options: it would take the workers' own (`--np`) for abbreviations of its.
            "--no-python", "--", *argv]


def require_state(state: ClusterState | None = None) -> ClusterState:
    """The given state, else the state file's; EmuError when no cluster is up or the state is stale."""
    state = state or load_state()
    if state is None:
        raise netns.EmuError("no emulated cluster is up: start one with `fabriclab emu up ...`")
    missing = [name for name in state.namespaces if name not in set(netns.list_netns())]
    if missing:
        raise netns.EmuError(f"the emulated cluster is stale (namespace {missing[0]} is gone): run "
                             f"`fabriclab emu down` and `fabriclab emu up ...` again")
    return state


class _Rank:
    def __init__(self, rank: int, namespace: str, argv: Sequence[str], env: dict[str, str],
                 on_line: Callable[[int, str], None] | None) -> None:
        self.rank, self.namespace, self.lines, self.status = rank, namespace, [], "ok"
        self.start = time.perf_counter()
        self.end: float | None = None
        self.proc = subprocess.Popen(["ip", "netns", "exec", namespace, *argv], env=env, text=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, errors="replace", bufsize=1,
                                     start_new_session=True, preexec_fn=netns.die_with_parent)
        self.reader = threading.Thread(target=self._read, args=(on_line,), daemon=True)
        self.reader.start()

    def _read(self, on_line: Callable[[int, str], None] | None) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if len(self.lines) > 2 * KEEP_LINES:
                del self.lines[:KEEP_LINES]
            if on_line is not None:
                on_line(self.rank, line)

    def poll(self) -> int | None:
        code = self.proc.poll()
        if code is not None and self.end is None:
            self.end = time.perf_counter()
        return code

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill_leftovers(self) -> None:
        """SIGKILL what still runs in this rank's namespace: torchrun starts its workers in sessions of
        their own, out of reach of `signal`, and they must not outlive the agent we stopped."""
        for pid in netns.netns_pids(self.namespace):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def result(self) -> RankResult:
        self.reader.join(timeout=5.0)
        code = self.proc.returncode
        status = "ok" if code == 0 else ("failed" if self.status == "ok" else self.status)
        if status == "timeout" and code is not None and code < 0:
            code = TIMEOUT_CODE
        return RankResult(rank=self.rank, namespace=self.namespace, returncode=code, status=status,
                          elapsed_s=(self.end or time.perf_counter()) - self.start,
                          output="\n".join(self.lines[-KEEP_LINES:]))


def _stop(ranks: list[_Rank], status: str, sweep: bool = False) -> None:
    """SIGTERM the ranks still running (marking them `status`), then SIGKILL after GRACE_S; `sweep` also
    kills what is left in their namespaces (the workers of a torchrun agent)."""
    running = [r for r in ranks if r.poll() is None]
    for r in running:
        r.status = status
        r.signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while any(r.poll() is None for r in running) and time.monotonic() < deadline:
        time.sleep(0.02)
    for r in running:
        if r.poll() is None:
            r.signal(signal.SIGKILL)
            r.proc.wait()
            r.poll()
    for r in ranks if sweep else ():
        r.kill_leftovers()


def run_in_cluster(argv: Sequence[str], timeout_s: float | None = None, *, state: ClusterState | None = None,
                   master_port: int = DEFAULT_MASTER_PORT, env: Mapping[str, str] | None = None,
                   on_line: Callable[[int, str], None] | None = None, launcher: str = "direct",
                   nproc_per_host: int = 1) -> list[RankResult]:
    """Run `argv` once per host of the emulated cluster and wait; results in host order.

    `launcher` direct: `argv` is rank `host` itself; torchrun: a torchrun agent per host starts
    `nproc_per_host` workers running `argv` (its results are then the agents', one per host).
    Call it from a thread that outlives the ranks (the kernel kills them when their starter thread ends)."""
    if not argv:
        raise ValueError("no command given: write it after `--`, e.g. `fabriclab emu run -- python train.py`")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout {timeout_s} s: give a positive number of seconds")
    if launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}: use {' or '.join(LAUNCHERS)}")
    if not 1 <= nproc_per_host <= 1024:
        raise ValueError(f"--nproc-per-host {nproc_per_host}: give 1..1024 processes per host")
    if launcher == "direct" and nproc_per_host != 1:
        raise ValueError("the direct launcher starts one process per host: use --launcher torchrun for "
                         f"{nproc_per_host} processes per host")
    netns.check_system()
    state = require_state(state)
    sweep = launcher == "torchrun"
    ranks: list[_Rank] = []
    try:
        for host in state.hosts:
            if launcher == "torchrun":
                command, environ = (torchrun_argv(state, host.rank, argv, nproc_per_host, master_port),
                                    host_env(state, host.rank, env))
            else:
                command, environ = argv, rank_env(state, host.rank, master_port, env)
            ranks.append(_Rank(host.rank, host.namespace, command, environ, on_line))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while any(r.poll() is None for r in ranks):
            if any(r.poll() not in (None, 0) for r in ranks):
                _stop(ranks, "killed", sweep)
                break
            if deadline is not None and time.monotonic() > deadline:
                _stop(ranks, "timeout", sweep)
                break
            time.sleep(0.02)
    except BaseException:
        _stop(ranks, "killed", sweep)
        raise
    return [r.result() for r in ranks]


def first_failure(results: Sequence[RankResult]) -> RankResult | None:
    """The rank that failed by itself and exited first, else the first timed-out rank, else None."""
    failed = sorted((r for r in results if r.status == "failed"), key=lambda r: r.elapsed_s)
    return failed[0] if failed else next((r for r in results if r.status == "timeout"), None)


def raise_on_failure(results: Sequence[RankResult], what: str, output: "os.PathLike | None" = None) -> None:
    """Raise EmuError naming the failed rank, its namespace, how it ended and its last output lines,
    when a rank failed or the run's `output` file is missing; `what` names the job (e.g. `training`)."""
    bad = first_failure(results)
    if bad is None and (output is None or os.path.exists(output)):
        return
    bad = bad or results[0]
    tail = "\n".join(bad.output.splitlines()[-15:])
    raise netns.EmuError(f"{what} rank {bad.rank} ({bad.namespace}) ended {bad.status} with code "
                         f"{bad.returncode}:\n{tail}")


def exit_code(results: Sequence[RankResult]) -> int:
    """What `emu run` exits with: the first failure's code (128 + signal if killed), else rank 0's."""
    bad = first_failure(results)
    code = (bad or results[0]).returncode
    return 128 - code if code < 0 else code


def ping_hosts(state: ClusterState, topology: Topology | None = None,
               count: int = 3) -> list[tuple[int, int, list[float | None]]]:
    """(rank, links on the route from rank 0, RTTs in s or None if lost) for every host but rank 0."""
    topology = topology or build_topology(state.topology_spec())
    source = state.hosts[0].namespace
    return [(h.rank, len(topology.route(0, h.rank)), netns.ping(source, h.ip, count=count))
            for h in state.hosts[1:]]


def hop_latency(rtts: tuple[tuple[int, int, float], ...]) -> float | None:
    """One-way latency per link from (rank, links, RTT): half the slope of RTT over links when routes of
    two or more lengths were measured (the intercept is ICMP and timing overhead), else RTT / 2 / links."""
    if not rtts:
        return None
    links = np.array([r[1] for r in rtts], dtype=float)
    rtt = np.array([r[2] for r in rtts], dtype=float)
    if np.unique(links).size > 1:
        return max(float(np.polyfit(links, rtt, 1)[0]) / 2, 0.0)
    return float(np.min(rtt / links)) / 2
