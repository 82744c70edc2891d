"""The fabric benchmark of Samsi et al. (TX-GAIA) in the emulated cluster: training images/sec per fabric,
workers and algorithm.

For every fabric preset (`25gbe`, `100g-opa`, scaled by `scale`, i.e. dilation D = 1/scale) and every
worker count, one emulated star of that many hosts (TX-GAIA's Ethernet has one non-blocking core switch)
is built; in it, for every all-reduce algorithm, `fabriclab train` runs one rank per host namespace with
replayed compute (`--replay PROFILE --dilation D`: each rank waits out the profile's per-layer times x D
while exchanging real gradient-sized tensors over the shaped links, which run at bandwidth / D). The
measured images/sec are un-dilated (x D), so they are those of the real fabric with the profile's GPUs.

Beside every measurement, two predictions of the same scenario on the real (un-dilated) fabric, both
replaying the profile's backward with the trainer's buckets (`whatif.iteration`):
* **what-if**: Zhang et al.'s (NetAI'20) closed form per bucket (2S(N-1)/N / bw + (N-1) AddEst(S/N), V100 add table);
* **sim**: the flow-level simulator running the algorithm's schedule on the star of that fabric.
and the error of each, (predicted - measured) / measured. The fabric difference is averaged over the
(workers, algorithm) points both fabrics have, as Samsi et al. report it (12.78 % fewer images/sec on
25 GbE than on Omni-Path).

Real compute is refused: N ranks computing a ResNet on this box's cores would measure the CPU, not the
fabric. The trainer runs one helper thread (`--comm-threads 1`), so buckets go one after another as the
predictions assume (Horovod's one background thread).

Try it: `sudo fabriclab bench fabrics --fabrics 25gbe,100g-opa --workers 2,4 --algos ring --steps 2 --warmup 1`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

from fabriclab.collectives import registry
from fabriclab.collectives.schedule import ALLREDUCE
from fabriclab.emu.cluster import EmuConfig, emulated_cluster
from fabriclab.emu.launch import raise_on_failure, run_in_cluster
from fabriclab.emu.presets import DEFAULT_SCALE, FABRIC_PRESET_NAMES, apply_preset, fabric_preset, parse_scale
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.scenario import TopologySpec, build_topology

REPLAY = "replay:"
# Deep queues as in the validation: Samsi et al.'s fabrics are lossless (RoCE with PFC, Omni-Path credits).
QUEUE_S = 200e-3
BURST_S = 1e-3
SAMSI_MEASURED_DIFFERENCE_PCT = 12.78
"""Samsi et al. (TX-GAIA, Section IV): the 25 GbE fabric's measured average reduction of images/sec against
100 Gb Omni-Path, over all their CNN training runs."""


@dataclass(frozen=True, kw_only=True)
class FabricsConfig:
    """One fabric benchmark: fabrics x workers x algorithms, with replayed compute."""

    fabrics: tuple[str, ...] = FABRIC_PRESET_NAMES
    """Fabric presets of `emu.presets` (Samsi et al.'s 25gbe and 100g-opa)."""
    workers: tuple[int, ...] = (2, 4, 8)
    """Worker counts; one emulated host (and rank) each."""
    algos: tuple[str, ...] = ("ring", "butterfly", "hierarchical:group=2")
    """All-reduce algorithms of our trainer (`allreduce:ALGO`); hierarchical with groups of 2, as
    TX-GAIA's nodes hold 2 GPUs."""
    compute: str = "replay:resnet50"
    """`replay:PROFILE`: a built-in V100 profile (resnet50, resnet101, vgg16) or a profile file."""
    scale: str = DEFAULT_SCALE
    """Link rate scale; the dilation D = 1/scale divides link rates and multiplies replayed compute."""
    steps: int = 3
    """Timed training steps per point."""
    warmup: int = 1
    """Untimed steps before them."""
    timeout_s: float = 900.0
    """Longest run of one point (all ranks)."""

    def __post_init__(self) -> None:
        for name in self.fabrics:
            fabric_preset(name)
        if not self.fabrics or not self.workers or not self.algos:
            raise ValueError("give at least one fabric, worker count and algorithm")
        if min(self.workers) < 2:
            raise ValueError(f"worker counts {self.workers}: a fabric needs >= 2 workers, e.g. 2,4,8")
        if not self.compute.startswith(REPLAY) or not self.compute[len(REPLAY):]:
            raise ValueError(f"--compute {self.compute!r}: use replay:PROFILE (e.g. replay:resnet50); real "
                             f"compute of several ranks on this box's cores would measure the CPU, not the fabric")
        for algo in self.algos:
            for n in self.workers:
                registry.parse_spec(ALLREDUCE, algo, n)
        if self.steps < 1 or self.warmup < 0:
            raise ValueError(f"need steps >= 1 and warmup >= 0, got {self.steps} and {self.warmup}")
        parse_scale(self.scale)
        self.profile  # a missing or malformed profile fails here, before any cluster is built

    @property
    def profile_name(self) -> str:
        return self.compute[len(REPLAY):]

    @cached_property
    def profile(self):
        """The replayed profile, read once (every point's prediction and command use it)."""
        from fabriclab.workload.profile import load_profile

        return load_profile(self.profile_name)


def compute_spec(model: str, compute: str) -> str:
    """`FabricsConfig.compute` of a model and a compute choice: `replay` replays the model's profile,
    `replay:PROFILE` that profile (a model other than the default must then name the same one)."""
    spec = compute.strip()
    if spec == "replay":
        spec = f"{REPLAY}{model.strip()}"
    elif spec.startswith(REPLAY) and model.strip() != "resnet50" and spec != f"{REPLAY}{model.strip()}":
        raise ValueError(f"--model {model} and --compute {compute} name different profiles: give one")
    return spec


def algo_specs(names: list[str]) -> tuple[str, ...]:
    """All-reduce specs of algorithm names: `hierarchical` groups 2 ranks, as TX-GAIA's nodes hold 2 GPUs."""
    return tuple(a if a != "hierarchical" else "hierarchical:group=2" for a in names)


def predict(config: FabricsConfig, fabric: str, workers: int, algo: str) -> dict[str, float]:
    """The what-if's and the simulator's images/sec for one point, on the real fabric."""
    from fabriclab.runtime.trainer_config import TrainerConfig
    from fabriclab.whatif.bucket_time import CostModel
    from fabriclab.whatif.iteration import simulate_iteration
    from fabriclab.workload.addcost import builtin_add_cost

    profile = config.profile
    bandwidth = link_preset(fabric_preset(fabric).link).bandwidth_Bps
    spec = apply_preset(TopologySpec(kind="star", hosts=workers), fabric, config.scale)[0]
    add = builtin_add_cost()
    policy = TrainerConfig().policy
    images = workers * profile.batch_size
    out = {}
    for name, model in (("whatif", CostModel(kind="ring-addest", bandwidth_Bps=bandwidth, num_workers=workers,
                                             add_cost=add)),
                        ("sim", CostModel(kind="simulated", bandwidth_Bps=bandwidth, num_workers=workers,
                                          add_cost=add, algo=algo, topology=build_topology(spec)))):
        it = simulate_iteration(profile, policy, model)
        out[f"{name}_images_per_sec"] = images / it.iteration_s
        out[f"{name}_iteration_s"] = it.iteration_s
        out[f"{name}_exposed_s"] = it.overhead_s
    return out


def train_argv(config: FabricsConfig, workers: int, algo: str, dilation: float, out: Path) -> list[str]:
    """The command every emulated host runs for one point."""
    batch = workers * config.profile.batch_size
    return [sys.executable, "-m", "fabriclab", "train", "--replay", config.profile_name,
            "--dilation", f"{dilation:g}", "--batch-size", str(batch), "--sync", f"allreduce:{algo}",
            "--overlap", "backward", "--comm-threads", "1", "--steps", str(config.steps),
            "--warmup", str(config.warmup), "--runtime", "ours", "--no-baseline",
            "--timeout", str(config.timeout_s), "--json", str(out)]


def measure_point(config: FabricsConfig, state, workers: int, algo: str, dilation: float,
                  on_line: Callable[[int, str], None] | None = None) -> dict:
    """Train one point in the running cluster; the un-dilated figures of rank 0's record."""
    with tempfile.TemporaryDirectory(prefix="fabriclab-fabrics-") as tmp:
        out = Path(tmp) / "train.json"
        results = run_in_cluster(train_argv(config, workers, algo, dilation, out), timeout_s=config.timeout_s,
                                 state=state, on_line=on_line)
        raise_on_failure(results, "training", out)
        ours = json.loads(out.read_text())["results"]["runtimes"]["ours"]
    return {"images_per_sec": ours["images_per_sec"] * dilation, "jitter": ours["jitter"] * dilation,
            "iteration_s": ours["iteration_s"] / dilation, "exposed_s": ours["exposed_s"] / dilation,
            "comm_s": ours["comm_s"] / dilation, "bytes_sent": ours["bytes_sent"],
            "params_agree": ours["params_agree"]}


def run_fabrics(config: FabricsConfig, *, on_row: Callable[[dict], None] | None = None,
                on_line: Callable[[int, str], None] | None = None) -> list[dict]:
    """Every fabric x workers (one emulated star each) x algorithm; one row per point."""
    rows = []
    for fabric in config.fabrics:
        for workers in config.workers:
            spec, dilation = apply_preset(TopologySpec(kind="star", hosts=workers), fabric, config.scale)
            emu = EmuConfig(dilation=dilation, burst_s=BURST_S, queue_s=QUEUE_S)
            with emulated_cluster(spec, config=emu) as state:
                for algo in config.algos:
                    measured = measure_point(config, state, workers, algo, dilation, on_line)
                    row = {"fabric": fabric, "workers": workers, "algo": algo, "dilation": dilation,
                           **measured, **predict(config, fabric, workers, algo)}
                    for name in ("whatif", "sim"):
                        row[f"{name}_err_pct"] = _error(row[f"{name}_images_per_sec"], row["images_per_sec"])
                    rows.append(row)
                    if on_row is not None:
                        on_row(row)
    return rows


def fabric_difference(rows: list[dict], slow: str = "25gbe", fast: str = "100g-opa") -> dict[str, float] | None:
    """Average over the (workers, algo) points both fabrics have of (fast - slow) / fast, in percent, for
    the measurement and both predictions; None when a fabric is missing."""
    by = {(r["fabric"], r["workers"], r["algo"]): r for r in rows}
    pairs = [(by[(slow, w, a)], by[(fast, w, a)]) for (f, w, a) in by if f == slow and (fast, w, a) in by]
    if not pairs:
        return None
    out = {"points": float(len(pairs))}
    for key, field in (("measured", "images_per_sec"), ("whatif", "whatif_images_per_sec"),
                       ("sim", "sim_images_per_sec")):
        out[f"{key}_pct"] = sum((f[field] - s[field]) / f[field] for s, f in pairs) / len(pairs) * 100
    return out


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured * 100 if measured > 0 else float("nan")
