"""Measure the collectives on emulated stars of two sizes, then fit the small one and predict the large one.

`measure(config, num_hosts)` builds an emulated star of `num_hosts` hosts (namespaces, one tbf-shaped
full-duplex link per host, `emu.cluster.emulated_cluster`, which always tears it down: on return, on an
exception, on Ctrl-C and on SIGTERM), runs `collectives.rank` on every host (one rank per host, every op
at every size, `native`), and returns rank 0's rows with the machine's load around the run. Every wait
has a limit: the ranks' rendezvous and collectives (`timeout_s`), and the whole run (a multiple of the
fluid time the sizes need at the shaped rate, plus start-up). `run_check` measures the calibration host
count, then the predicted one, and compares (`collectives.predict`).

Try it: `sudo fabriclab validate collectives --ops allgather,alltoall --hosts 4 --calibrate-hosts 2`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from fabriclab.bench.validate.collectives.config import CheckConfig
from fabriclab.bench.validate.collectives.predict import compare
from fabriclab.bench.validate.run import machine_load
from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.emu.cluster import emulated_cluster
from fabriclab.emu.launch import raise_on_failure, run_in_cluster

# Start-up of the ranks (torch import and rendezvous in every namespace, 2 cores) and per op and size
# (inputs built, barriers), seconds: generous, a stuck run still ends.
STARTUP_S = 90.0
PER_ROW_S = 10.0
# The run may take this many times the fluid estimate (TCP, the kernel's forwarding and other jobs).
SLACK = 4.0


def plan(config: CheckConfig) -> dict:
    """What every rank runs (the JSON `collectives.rank` reads)."""
    return {"ops": list(config.ops), "sizes_bytes": list(config.sizes_bytes), "iters": config.iters,
            "warmup": config.warmup, "timeout_s": config.timeout_s}


def fluid_seconds(config: CheckConfig, num_hosts: int) -> float:
    """Time of every iteration at the shaped rate, as a fluid: a lower bound, the base of the run's limit."""
    rate = config.rate_Bps * config.efficiency
    return sum((config.iters + config.warmup) * size * bus_bandwidth_factor(op, num_hosts) / rate
               for op in config.ops for size in config.sizes_bytes)


def run_limit_s(config: CheckConfig, num_hosts: int) -> float:
    """Longest the ranks of one measurement may run before they are stopped."""
    rows = len(config.ops) * len(config.sizes_bytes)
    return SLACK * fluid_seconds(config, num_hosts) + STARTUP_S + PER_ROW_S * rows


def measure(config: CheckConfig, num_hosts: int, *, on_line: Callable[[int, str], None] | None = None) -> dict:
    """Build the star of `num_hosts`, run every op and size on it, tear it down; rows and facts."""
    start, before = time.perf_counter(), machine_load()
    with tempfile.TemporaryDirectory(prefix="fabriclab-collectives-") as tmp:
        plan_path, out_path = Path(tmp) / "plan.json", Path(tmp) / "rows.json"
        plan_path.write_text(json.dumps(plan(config)))
        argv = ["nice", "-n", str(config.nice), sys.executable, "-m", "fabriclab.bench.validate.collectives.rank",
                "--config", str(plan_path), "--out", str(out_path)]
        with emulated_cluster(config.spec(num_hosts), config=config.emu_config()) as state:
            results = run_in_cluster(argv, timeout_s=run_limit_s(config, num_hosts), state=state, on_line=on_line)
            hop_latency_s = state.hop_latency_s
        raise_on_failure(results, "collectives check", out_path)
        measured = json.loads(out_path.read_text())
    return {"rows": measured["rows"], "num_hosts": measured["world_size"], "hop_latency_s": hop_latency_s,
            "wall_s": time.perf_counter() - start, "load_before": before, "load_after": machine_load()}


def run_check(config: CheckConfig, *, on_line: Callable[[int, str], None] | None = None,
              on_measured: Callable[[int, dict], None] | None = None) -> dict:
    """Measure on `calibrate_hosts`, then on `hosts`; fit the first, predict the second: the record's results.
    `on_measured(num_hosts, measurement)` is called after each measurement (progress)."""
    start = time.perf_counter()
    measured = {}
    for num_hosts in (config.calibrate_hosts, config.hosts):
        measured[num_hosts] = measure(config, num_hosts, on_line=on_line)
        if on_measured is not None:
            on_measured(num_hosts, measured[num_hosts])
    out = compare(config, measured[config.calibrate_hosts], measured[config.hosts])
    out["wall_s"] = time.perf_counter() - start
    return out
