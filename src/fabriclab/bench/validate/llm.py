"""`validate emulated --workload llm`: a real TP x PP x DP (x EP) transformer step in the emulated cluster,
measured beside `whatif llm`'s prediction of the same step.

1. **Calibrate** on this machine, outside the emulation: the compute efficiency from a 1-rank run of the
   same model, global batch and precision, run before and after the measurement, the median of both
   (`whatif.llm.run.calibrate_efficiency`: the share of a nominal peak at which the simulated 1-GPU step
   lasts as long as the measured one), and the intra-host link of Gloo over the kernel's local delivery
   (2 local ranks all-reduce a small and a large buffer: the small one's time per ring step is the per-step
   latency, the difference the bandwidth). In the emulated star, before the job, one rank per host
   streams 8 MiB to the next host while receiving from the previous one (`validate.rank.calibrate`, as the
   collectives validation does): the links' goodput. TCP through a tbf of a small queue loses packets and
   backs off, so it moves less than the framing alone allows (about 0.91 of the shaped rate where the
   framing gives 0.956).
2. **Predict** with a cluster of `hosts` servers of `gpus_per_server` GPUs: that intra-host link, one NIC per
   server at that goodput (TCP's payload share where a host is alone), Gloo's ring library with the
   measured step latency, the calibrated compute; the trainer's own overlap (none: DP reduces after the
   last backward).
3. **Measure**: a star of `hosts` namespaces with tbf-shaped links, a torchrun agent per host starting
   `gpus_per_server` ranks of `fabriclab train` (ranks on one host talk through the kernel, unshaped).
   The simulator puts bf16 values on the wire; the trainer runs float32 (bf16 is slow on CPUs), so the
   predicting cluster's bandwidths are halved.
4. **Compare** step time and each part of it (compute, TP, EP, PP, DP, optimizer, bubble; `wait`, the time
   ranks waited in collectives for the last member of their group, is measured only) with the error;
   goal: step within 15 %, every communicator within 25 % where it is above 10 % of the step.

Try it: `sudo fabriclab validate emulated --workload llm --hosts 4 --gpus-per-server 1
--tp 1 --pp 2 --gbs 4 --model gpt-mini --link 50Mbps`.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from fabriclab.bench.validate.model import TCP_PAYLOAD_EFFICIENCY
from fabriclab.fabric.cluster import ComputeSpec, StepLatency, prior_cluster
from fabriclab.fabric.gpus import GpuSpec
from fabriclab.fabric.links import Link
from fabriclab.whatif.llm.run import calibrate_efficiency, simulate_llm
from fabriclab.whatif.llm.step import StepOptions
from fabriclab.whatif.llm.trace import step_trace
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

PARTS = ("compute", "tp", "ep", "pp", "dp", "optimizer", "bubble", "wait")
COMMUNICATORS = ("tp", "ep", "pp", "dp")
STEP_GOAL, COMM_GOAL, COMM_SHARE = 0.15, 0.25, 0.10
# A nominal peak for a CPU rank: only efficiency x peak matters, and the calibration finds the efficiency.
NOMINAL_PEAK_FLOPS = 1e12
# The trainer's overlap and buckets, told to the prediction: DP reduces one flat buffer per chunk after the
# step's last backward, ZeRO gathers after the optimizer (before the next step's first forward), ZeRO-3
# gathers and reduces a whole chunk per pass (runtime/llm/dp.py).
TRAINER_OPTIONS = StepOptions(tp_overlap=False, overlap_grad_reduce=False, overlap_param_gather=False,
                              bucket_params=0, fsdp_unit=0, grad_bytes=2)  # bf16 bytes at half the bandwidth (3.)


@dataclass(frozen=True, kw_only=True)
class LlmValidateConfig:
    """One validation of the transformer step in the emulated cluster."""

    model: str = "gpt-tiny"
    """Transformer (a built-in name or a config.json)."""
    hosts: int = 4
    """Emulated hosts (a star)."""
    gpus_per_server: int = 2
    """Ranks per host ("GPUs"), talking through the kernel's local delivery."""
    tp: int = 2
    """Tensor-parallel ranks (inside a host with the default order)."""
    pp: int = 2
    """Pipeline stages."""
    vp: int = 1
    """Virtual stages."""
    ep: int = 1
    """Expert-parallel ranks (MoE models)."""
    mbs: int = 1
    """Micro-batch size."""
    gbs: int = 16
    """Global batch size."""
    seq: int | None = None
    """Sequence length (default: the model's)."""
    zero: int = 1
    """ZeRO stage."""
    link_Bps: float = 25e6
    """Shaped rate of every host's link, bytes/s (200 Mbit/s)."""
    steps: int = 6
    """Timed steps (the median is compared)."""
    warmup: int = 2
    """Untimed steps first."""
    dtype: str = "float32"
    """The trainer's precision (bfloat16 matrix math is over 10x slower than float32 on CPUs without AMX)."""
    timeout_s: float = 300.0
    """Longest run of one measurement."""
    nice: int = 0
    """nice(1) priority of every run (calibrations and ranks), -20..19: negative keeps other jobs of a
    shared machine from stretching the times."""

    def par(self) -> ParallelConfig:
        spec = load_model(self.model)
        return ParallelConfig(num_gpus=self.hosts * self.gpus_per_server, tp=self.tp, pp=self.pp, vp=self.vp,
                              ep=self.ep, mbs=self.mbs, gbs=self.gbs, seq=self.seq or spec.seq_length,
                              sequence_parallel=self.tp > 1, zero=self.zero)


def train_argv(config: LlmValidateConfig, out: Path, num_ranks: int, *, seq: int) -> list[str]:
    return [sys.executable, "-m", "fabriclab", "train", "--model", config.model, "--np", str(num_ranks),
            "--tp", str(config.tp if num_ranks > 1 else 1), "--pp", str(config.pp if num_ranks > 1 else 1),
            "--vp", str(config.vp if num_ranks > 1 else 1), "--ep", str(config.ep if num_ranks > 1 else 1),
            "--mbs", str(config.mbs), "--gbs", str(config.gbs), "--seq", str(seq),
            "--zero", str(config.zero if num_ranks > 1 else 0), "--steps", str(config.steps), "--warmup",
            str(config.warmup), "--dtype", config.dtype, "--timeout", str(config.timeout_s), "--json", str(out)]


def calibrate_compute(config: LlmValidateConfig) -> dict:
    """The 1-rank run of the same model and global batch, in this process's namespace."""
    from fabriclab.runtime.llm.reference import run_single
    from fabriclab.runtime.llm.trainer import LlmTrainConfig

    par = config.par()
    one = replace(par, num_gpus=1, tp=1, pp=1, vp=1, ep=1, zero=0, sequence_parallel=False)
    result = run_single(LlmTrainConfig(spec=load_model(config.model), par=one, steps=config.steps,
                                       warmup=config.warmup, dtype=config.dtype))
    return {"step_time_s": result["step_time_s"], "step_times_s": result["step_times_s"], "par": one}


def loopback_link(num_ranks: int = 2, sizes_bytes=(4096, 4 << 20), iters: int = 20) -> dict:
    """Per-step latency and bandwidth of Gloo through the kernel: `num_ranks` local ranks in pairs, every
    pair all-reducing at once (the job's ranks share the machine's cores as the pairs do), a small and a
    large buffer; a 2-rank ring all-reduce is 2 steps of half the buffer."""
    from fabriclab.runtime.launch import LaunchConfig, launch

    num_ranks = max(2, num_ranks - num_ranks % 2)
    times = launch(_allreduce_times, (sizes_bytes, iters), config=LaunchConfig(num_ranks=num_ranks)).results[0]
    small, large = times
    # the difference carries the bandwidth; where the load drowned it (a small call as slow as a large one),
    # the large call's whole time bounds it from below
    spread = large - small
    bandwidth = (sizes_bytes[1] - sizes_bytes[0]) / spread if spread > 0.2 * large else sizes_bytes[1] / large
    return {"step_s": small / 2, "bandwidth_Bps": bandwidth, "times_s": times, "num_ranks": num_ranks}


def _allreduce_times(ctx, sizes_bytes, iters) -> list[float]:
    import torch
    import torch.distributed as dist

    pairs = [dist.new_group([r, r + 1]) for r in range(0, ctx.world_size, 2)]
    group = pairs[ctx.rank // 2]
    out = []
    for size in sizes_bytes:
        x = torch.zeros(size // 4)
        for _ in range(3):
            dist.all_reduce(x, group=group)
        runs = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(x, group=group)
            runs.append(time.perf_counter() - t0)
        out.append(statistics.median(runs))
    return out


def cluster_model(config: LlmValidateConfig, link: dict, efficiency: float = TCP_PAYLOAD_EFFICIENCY):
    """The emulated cluster as the simulator sees it, its NICs at `efficiency` x the shaped rate. The
    simulator puts 2 bytes per value on the wire (bf16); the trainer sends `dtype`'s: every bandwidth is
    scaled by 2 / that size, so each transfer takes the time of the bytes really sent (latencies unchanged)."""
    import torch

    from fabriclab.runtime.llm.trainer import DTYPES

    scale = 2 / torch.empty(0, dtype=DTYPES[config.dtype]).element_size()
    gpu = GpuSpec(name="CPU rank", peak_flops={"bf16": NOMINAL_PEAK_FLOPS, "fp8": NOMINAL_PEAK_FLOPS},
                  memory_bytes=1e12, memory_bandwidth_Bps=10e9, source="nominal: the calibration sets the share")
    cluster = prior_cluster(gpus_per_server=config.gpus_per_server, library="gloo", intra="pcie",
                            intra_link=Link(name="kernel loopback", bandwidth_Bps=link["bandwidth_Bps"] * scale),
                            nic=Link(name="emulated", bandwidth_Bps=config.link_Bps * efficiency * scale),
                            pcie=Link(name="none", bandwidth_Bps=1e12), nics_per_server=1, fabric="fat-tree",
                            leaf_ports=max(config.hosts, 2), name="emulated", memory_bandwidth_Bps=20e9,
                            compute=ComputeSpec(gpu=gpu))
    step = StepLatency(base_s=0.0, intra_step_s=link["step_s"], net_step_s=link["step_s"])
    return replace(cluster, library=replace(cluster.library, latencies={"ring": {"Simple": step}}))


def predict(config: LlmValidateConfig, calibration: dict, link: dict, link_efficiency: float | None = None) -> dict:
    spec, par = load_model(config.model), config.par()
    cluster = cluster_model(config, link, link_efficiency or TCP_PAYLOAD_EFFICIENCY)
    one = cluster_model(replace(config, hosts=1, gpus_per_server=1), link)
    # a CPU rank runs no GPU kernels: the flat share of a nominal peak, not the kernel model
    efficiency, _ = calibrate_efficiency(spec, calibration["par"], one, calibration["step_time_s"],
                                         options=TRAINER_OPTIONS, flat=True)
    answer = simulate_llm(spec, par, cluster, options=TRAINER_OPTIONS, efficiency=efficiency, check_memory=False)
    return {"step_time_s": answer.step_time_s, "split_s": dict(answer.result.split_s), "efficiency": efficiency,
            "comm": answer.result.comm, "answer": answer}


def measure(config: LlmValidateConfig, on_line=None) -> dict:
    """The step in the emulated star (needs root), after the star's links' goodput (`link_goodput`)."""
    from fabriclab.emu.cluster import emulated_cluster
    from fabriclab.emu.launch import raise_on_failure, run_in_cluster
    from fabriclab.fabric.scenario import TopologySpec

    spec = TopologySpec(kind="star", hosts=config.hosts, bandwidth_Bps=config.link_Bps, latency_s=0.0)
    par = config.par()
    with tempfile.TemporaryDirectory(prefix="fabriclab-llm-") as tmp, emulated_cluster(spec) as state:
        goodput = link_goodput(config, state, Path(tmp), on_line) if config.hosts > 1 else None
        out = Path(tmp) / "train.json"
        trace = Path(tmp) / "trace.json"
        argv = _niced(config, train_argv(config, out, par.num_gpus, seq=par.seq))
        results = run_in_cluster(argv + ["--trace", str(trace)], timeout_s=config.timeout_s, state=state,
                                  on_line=on_line, launcher="torchrun", nproc_per_host=config.gpus_per_server)
        raise_on_failure(results, "training", out)
        return json.loads(out.read_text())["results"] | {"trace": json.loads(trace.read_text()),
                                                         "link_efficiency": goodput}


def link_goodput(config: LlmValidateConfig, state, tmp: Path, on_line=None) -> float | None:
    """The shaped links' goodput as a share of their rate: one rank per host streams to the next host and
    from the previous one at once (the collectives validation's calibration, `validate.rank`), the
    bucket's free bytes taken out; None where the stream could not tell."""
    from fabriclab.bench.validate.model import stream_efficiency
    from fabriclab.emu.cluster import EmuConfig, shaping
    from fabriclab.emu.launch import raise_on_failure, run_in_cluster

    plan, out = tmp / "goodput-plan.json", tmp / "goodput.json"
    plan.write_text(json.dumps({"groups": [], "calibrate": True, "timeout_s": config.timeout_s}))  # calibration only
    argv = _niced(config, [sys.executable, "-m", "fabriclab.bench.validate.rank", "--config", str(plan),
                           "--out", str(out)])
    results = run_in_cluster(argv, timeout_s=config.timeout_s, state=state, on_line=on_line)
    raise_on_failure(results, "link calibration", out)
    burst = shaping(config.link_Bps, EmuConfig())[0]
    return stream_efficiency(json.loads(out.read_text())["calibration"], config.link_Bps, burst_bytes=burst)


def _niced(config: LlmValidateConfig, argv: list[str]) -> list[str]:
    return (["nice", "-n", str(config.nice)] if config.nice else []) + argv


def side_by_side(measured: dict, simulated: dict) -> dict:
    """One Perfetto trace: the measured ranks (pids 0..n-1) and the simulated stage (pid 1000), same threads."""
    shifted = [dict(e, pid=1000 + e["pid"]) for e in simulated["traceEvents"]]
    return {"traceEvents": measured["traceEvents"] + shifted, "displayTimeUnit": "ms",
            "otherData": {"measured": measured.get("otherData", {}), "simulated": simulated.get("otherData", {})}}


def compare(measured: dict, predicted: dict) -> list[dict]:
    """One row per part of the step and the step itself: measured, predicted, error, whether it is judged."""
    step_m = measured["step_time_s"]
    rows = [_row("step", step_m, predicted["step_time_s"], step_m, STEP_GOAL, judged=True)]
    for part in PARTS:
        m, p = measured["split_s"].get(part, 0.0), predicted["split_s"].get(part, 0.0)
        judged = part in COMMUNICATORS and m > COMM_SHARE * step_m
        rows.append(_row(part, m, p, step_m, COMM_GOAL, judged=judged))
    rows.append(_row("other", measured["split_s"].get("other", 0.0), 0.0, step_m, COMM_GOAL, judged=False))
    return rows


def _row(part: str, m: float, p: float, step: float, goal: float, *, judged: bool) -> dict:
    error = (p - m) / m if m > 0 else None
    ok = None if not judged else (error is not None and abs(error) <= goal)
    return {"part": part, "measured_s": m, "predicted_s": p, "share": m / step if step else 0.0,
            "error": error, "goal": goal if judged else None, "ok": ok}


@contextmanager
def _priority(nice: int):
    """This process (and what it starts) at `nice`, then back."""
    old = os.getpriority(os.PRIO_PROCESS, 0)
    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        yield
    finally:
        if nice:
            os.setpriority(os.PRIO_PROCESS, 0, old)


def run_llm_validation(config: LlmValidateConfig, *, on_line=None) -> dict:
    """Calibrate, predict, measure, compare."""
    from fabriclab.runtime.llm.summary import describe

    # the 1-rank run before and after the measurement, pooled: a shared machine's load drifts
    with _priority(config.nice):
        before = calibrate_compute(config)
        link = loopback_link(config.hosts * config.gpus_per_server)
    measured = measure(config, on_line)
    with _priority(config.nice):
        after = calibrate_compute(config)
    pooled = before["step_times_s"] + after["step_times_s"]
    calibration = before | {"step_time_s": statistics.median(pooled), "step_times_s": pooled}
    predicted = predict(config, calibration, link, measured["link_efficiency"])
    rows = compare(measured, predicted)
    return {"config": asdict(config), "parallel": describe(config.par(), config.dtype), "rows": rows,
            "passed": all(r["ok"] is not False for r in rows),
            "calibration": {"one_rank_step_s": calibration["step_time_s"], "efficiency": predicted["efficiency"],
                            "loopback_step_s": link["step_s"], "loopback_Bps": link["bandwidth_Bps"],
                            "link_efficiency": measured["link_efficiency"]},
            "measured": {k: measured[k] for k in ("step_time_s", "split_s", "bytes_per_step", "losses",
                                                  "step_times_s")},
            "predicted": {k: predicted[k] for k in ("step_time_s", "split_s", "comm")},
            "answer": predicted["answer"], "trace": side_by_side(measured["trace"], step_trace(predicted["answer"]))}
