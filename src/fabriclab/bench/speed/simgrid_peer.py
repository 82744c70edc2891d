"""SimGrid as the peer of `fabriclab bench sim`: build its program, export the platform, run both as whole processes.

The peer is `simgrid_peer.cpp` (an s4u program doing the same allreduce schedules as `collectives/`), built
with Debian's SimGrid (`libsimgrid-dev`) and g++ into a cache directory, rebuilt when the source or the
SimGrid version changes. Each case runs in fabriclab and in SimGrid as fresh processes, alternating, and
every run's wall time and peak memory are its own process's (`os.wait4`). SimGrid runs with the network
model our simulator implements: CM02 (no latency or bandwidth correction factors), no TCP window bound
(`TCP-gamma:0`), no ACK cross traffic, and a clock precision of 1e-13 s (its default 1e-9 s moves ring
ends by ~1e-5 relative where blocks differ in size).

Try it: `fabriclab bench sim --peer simgrid --cases butterfly-2048`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("simgrid_peer.cpp")
INSTALL_HINT = "apt-get install -y libsimgrid-dev g++ pkg-config (Debian/Ubuntu: SimGrid 3.32's C++ API)"
SIMGRID_CONFIG = ("--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0", "--cfg=network/crosstraffic:0",
                  "--cfg=surf/precision:1e-13", "--log=root.thres:critical")
BUILD_TIMEOUT_S = 300.0


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "fabriclab" / "simgrid-peer"


def simgrid_version() -> str | None:
    """SimGrid's version from pkg-config when it and a C++ compiler are installed, else None."""
    if shutil.which("pkg-config") is None or shutil.which("g++") is None:
        return None
    out = subprocess.run(["pkg-config", "--modversion", "simgrid"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def build_line(output: Path) -> list[str]:
    """The compiler command (the flags from pkg-config)."""
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "simgrid"], capture_output=True, text=True,
                           timeout=30).stdout.split()
    return ["g++", "-O2", "-std=c++17", str(SOURCE), "-o", str(output), *flags]


def peer_binary(version: str) -> Path:
    """The built peer, compiled on first use and whenever its source or SimGrid's version changes."""
    key = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:16]
    binary = _cache_dir() / key / "simgrid_peer"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run(build_line(partial), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"building the SimGrid peer failed ({' '.join(build_line(binary))}): "
                           f"{done.stderr.strip()[-800:]}")
    partial.replace(binary)
    return binary


def platform_file(spec, name: str) -> Path:
    """The platform of `spec` (a `TopologySpec`) as SimGrid XML in the cache (`fabric/simgrid.py`)."""
    from fabriclab.fabric.scenario import build_topology
    from fabriclab.fabric.simgrid import to_simgrid_xml

    path = _cache_dir() / "platforms" / f"{name}.xml"
    text = to_simgrid_xml(build_topology(spec))
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


# Forks and times one command: a child's peak RSS counts the memory of the process it was forked from (the
# kernel keeps the high-water mark across exec), so a small launcher forks it, not this big process.
_LAUNCHER = """
import json, os, signal, sys, time
out, err, timeout_s, argv = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.setsid()
    os.dup2(os.open(out, os.O_WRONLY | os.O_TRUNC), 1)
    os.dup2(os.open(err, os.O_WRONLY | os.O_TRUNC), 2)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
killed = []
def stop(*_):
    killed.append(1)
    os.killpg(pid, signal.SIGKILL)
signal.signal(signal.SIGALRM, stop)
signal.setitimer(signal.ITIMER_REAL, timeout_s)
_, status, usage = os.wait4(pid, 0)
wall_s = time.perf_counter() - t0
signal.setitimer(signal.ITIMER_REAL, 0)
print(json.dumps({"wall_s": wall_s, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_MiB": usage.ru_maxrss / 1024, "timed_out": bool(killed),
                  "returncode": os.waitstatus_to_exitcode(status)}))
"""


def whole_process(argv: list[str], timeout_s: float, env: dict | None = None) -> dict:
    """Run `argv` to its end: wall seconds, its own peak RSS (MiB, `wait4`: like GNU time, with a floor of the
    launcher's ~10 MiB), its output; a run past `timeout_s` is killed and marked `timed_out`."""
    with tempfile.NamedTemporaryFile("w+") as out, tempfile.NamedTemporaryFile("w+") as err:
        done = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, out.name, err.name, str(timeout_s), *argv],
                              capture_output=True, text=True, timeout=timeout_s + 60, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"could not time {argv[0]}: {done.stderr.strip()[-500:]}")
        run = json.loads(done.stdout)
        out.seek(0)
        err.seek(0)
        run.update(stdout=out.read(), stderr=err.read())
        return run


def fabriclab_argv(case_name: str) -> list[str]:
    return [sys.executable, "-m", "fabriclab.bench.speed.sim", case_name, "auto"]


def simgrid_argv(binary: Path, platform: Path, peer_algo: str, hosts: int, size_bytes: int) -> list[str]:
    return [str(binary), str(platform), peer_algo, str(hosts), str(size_bytes), *SIMGRID_CONFIG]


def _simulated(run: dict, prefix: str) -> float:
    for line in run["stdout"].splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    raise RuntimeError(f"no simulated time in the output: {run['stdout'][-300:]} {run['stderr'][-500:]}")


def fabriclab_env() -> dict:
    """Our child's environment: its bytecode cached (in our cache directory, not the source tree), as in an
    installed package; where PYTHONDONTWRITEBYTECODE is set, every run would otherwise compile fabriclab."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(_cache_dir() / "pycache")
    return env


def _ours(case_name: str, timeout_s: float) -> dict:
    run = whole_process(fabriclab_argv(case_name), timeout_s, fabriclab_env())
    if run["returncode"] != 0:
        raise RuntimeError(f"fabriclab case {case_name} failed: {run['stderr'].strip()[-500:]}")
    child = json.loads(run["stdout"].strip().splitlines()[-1])
    run.update(sim_wall_s=child["wall_s"], simulated_s=child["simulated_s"], exact=child["exact"],
               engine=child["engine"])
    return run


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def beside(case, *, runs: int, timeout_s: float, binary: Path | None) -> dict:
    """One case in fabriclab and (with `binary`) in SimGrid, `runs` times each, alternating; medians.

    A SimGrid run past `timeout_s` is stopped and not repeated: its wall time is then a lower bound."""
    from fabriclab.bench.speed.sim import AGREE_REL, PEER_GOALS, SIZE_BYTES

    ours: list[dict] = []
    peer: list[dict] = []
    platform = platform_file(case.topology, case.name) if binary is not None else None
    for _ in range(runs):
        ours.append(_ours(case.name, timeout_s))
        if binary is not None and not (peer and peer[-1]["timed_out"]):
            run = whole_process(simgrid_argv(binary, platform, case.peer_algo, case.hosts, SIZE_BYTES), timeout_s)
            if run["returncode"] != 0 and not run["timed_out"]:
                raise RuntimeError(f"SimGrid peer failed on {case.name}: {run['stderr'].strip()[-500:]}")
            peer.append(run)
    row = {"case": case.name, "algo": case.algo, "hosts": case.hosts, "levels": case.levels, "runs": runs,
           "wall_s": _median(ours, "wall_s"), "cpu_s": _median(ours, "cpu_s"), "sim_wall_s": _median(ours, "sim_wall_s"),
           "peak_MiB": _median(ours, "peak_MiB"), "simulated_s": ours[0]["simulated_s"],
           "exact": ours[0]["exact"], "engine": ours[0]["engine"], "simgrid": None}
    if peer:
        done = [r for r in peer if not r["timed_out"]]
        sg = {"wall_s": _median(done, "wall_s") if done else peer[-1]["wall_s"], "timed_out": not done,
              "cpu_s": _median(done, "cpu_s") if done else peer[-1]["cpu_s"],
              "peak_MiB": _median(done, "peak_MiB") if done else peer[-1]["peak_MiB"], "runs": len(peer),
              "simulated_s": _simulated(done[0], "simulated_s") if done else None}
        goal = PEER_GOALS.get(case.hosts, 1.0)
        sg["ratio"] = sg["wall_s"] / row["wall_s"]
        sg["goal_ratio"] = goal
        sg["meets_goal"] = sg["ratio"] >= goal
        sg["memory_ok"] = row["peak_MiB"] <= sg["peak_MiB"]
        if sg["simulated_s"] is not None:
            sg["rel_diff"] = abs(sg["simulated_s"] - row["simulated_s"]) / sg["simulated_s"]
            sg["agrees"] = sg["rel_diff"] <= AGREE_REL
        row["simgrid"] = sg
    return row


def notes(rows: list[dict], timeout_s: float) -> list[str]:
    """What the table implies: the ring's growth, stopped runs, goals and memory."""
    out = []
    wall = {r["case"]: r["wall_s"] for r in rows}
    for small, large in (("ring-2048", "ring-16384"), ("ring-3level-2048", "ring-3level-16384")):
        if small in wall and large in wall:
            out.append(f"{large} / {small} (8x the hosts): {wall[large] / wall[small]:.1f}x the wall time "
                       f"(goal: at most 10x)")
    peers = [r for r in rows if r["simgrid"]]
    if any(r["simgrid"]["timed_out"] for r in peers):
        out.append(f"'>': SimGrid was stopped after {timeout_s:g} s (--peer-timeout) and not run again; its time "
                   f"and peak memory are lower bounds")
    if peers:
        missed = [r["case"] for r in peers if not (r["simgrid"]["meets_goal"] and r["simgrid"]["memory_ok"])]
        out.append("every case meets its goal (as fast as SimGrid at 2,048 hosts, 10x at 16,384, no more memory)"
                   if not missed else f"goal missed on {', '.join(missed)}")
    return out
