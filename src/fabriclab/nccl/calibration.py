"""A cluster file from nccl-tests logs: the prior the logs call for, the fit, the hold-out, the fit record.

`calibrate_cluster(CalibrationRequest(...))` is what `fabriclab calibrate nccl-tests` does once its
options are parsed: it checks that the logs come from one kind of server and GPU, builds the prior
(`fabric.cluster.prior_cluster`: data sheets and NCCL's constants, or Gloo's ring for fabriclab's own
benchmark tables), fits it (`nccl/fit.py`), predicts the held-out rows and returns the calibrated cluster
with its fit record (which logs, which parameters moved, the residual summaries per band).

Try it: `fabriclab calibrate nccl-tests examples/nccl-tests-a100/nccl_{2,4,8}.log --check
examples/nccl-tests-a100/nccl_16.log --out cluster.json`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from fabriclab.fabric.cluster import LEGACY_NCCL_VERSION, ClusterModel, prior_cluster
from fabriclab.fabric.gpus import gpu_for_name
from fabriclab.fabric.links import Link, link_preset
from fabriclab.fabric.nccl_env import check_nccl_env
from fabriclab.nccl.band import row_bands
from fabriclab.nccl.fit import calibrate, check, seen_by, summary
from fabriclab.nccl.predict import COSTED, predict_nccl_table
from fabriclab.nccl.logs import NcclRun
from fabriclab.nccl.versions import P2P_PER_CHANNEL_NET_GBPS


@dataclass(frozen=True, kw_only=True)
class CalibrationRequest:
    """Logs to fit and to check, and what the logs do not say about the servers."""

    runs: tuple[NcclRun, ...]
    """Runs to fit."""
    held: tuple[NcclRun, ...] = ()
    """Runs to predict and compare (all their rows, or only those in `hold_out_range`)."""
    hold_out_range: tuple[int, int] | None = None
    """(smallest, largest) size in bytes: only these rows of `held` are held out; the others join the fit."""
    nic: Link
    """The servers' NIC (the logs do not say)."""
    nics_per_server: int | None = None
    """NICs per server; None: one per GPU."""
    gpus_per_server: int | None = None
    """GPUs per server; None: from the logs' hosts, else the largest one-server run."""
    intra: str = "nvswitch"
    """nvswitch or pcie."""
    fabric: str = "rail"
    """rail or fat-tree."""
    sharp: bool = False
    """The switches reduce in the network (SHARP): NCCL may run CollNet (`--sharp`)."""
    nccl_env: dict = field(default_factory=dict)
    """NCCL variables the logs were measured with that restrict its algorithms and protocols (`--nccl-env
    NCCL_PROTO=Simple`; `fabric/nccl_env.py`): the prior's `library.nccl_env`."""
    tuner: tuple = ()
    """The tuner plugin's rules the logs ran under (`--nccl-tuner FILE`; `fabric/nccl_tuner.py`): the prior's
    `library.tuner`."""
    check_nic: bool = True
    """Refuse a fit whose large multi-server rows contradict `nic` (`check_nic`). False where the NIC is known
    by construction (an emulated cluster's links, shaped by fabriclab): a shortfall there is the library's."""
    name: str = "cluster"
    """Name of the cluster written."""
    nccl_version: str | None = None
    """NCCL version the logs were measured with (`--nccl-version`); None: what the logs say, else
    `LEGACY_NCCL_VERSION`."""
    log_names: tuple[str, ...] = ()
    """The fitted logs' file names (for the description)."""
    record: dict = field(default_factory=dict)
    """Extra facts for the fit record (e.g. the log paths as given)."""
    estimates_fit: bool = False
    """Fit also the rows NCCL runs with an algorithm costed by its own estimate (NVLS, CollNet, PAT); False
    leaves them out of the fit (`nccl.fit.calibrate`), True is the model before the nccl-tests corpus."""
    datasheet: bool = True
    """Take the GPU's HBM rate and PCIe generation from its data sheet (`datasheet_for`); False: the A100
    defaults of `prior_cluster` for every GPU (the model before the nccl-tests corpus)."""


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The calibrated cluster and what the fit found."""

    cluster: ClusterModel
    params: list
    residuals: list
    fitted_summary: list
    held_summary: list
    coverage: list
    """Per GPU count of the held-out rows: rows, rows whose measured busbw lies inside the printed range."""
    version_note: str
    """Which NCCL version the model runs, and where that came from."""


def nccl_version_for(runs: list[NcclRun], given: str | None) -> tuple[str, str]:
    """(the NCCL version to model, a note saying where it came from); a ValueError when the logs disagree
    with each other or with `given`."""
    said = {r.nccl_version: r.source for r in runs if r.nccl_version}
    if len(said) > 1:
        found = ", ".join(f"{v} ({Path(src).name})" for v, src in sorted(said.items()))
        raise ValueError(f"the logs come from different NCCL versions ({found}): calibrate each version on its own "
                         f"logs")
    if given is not None:
        from fabriclab.nccl.versions import parse_nccl_version

        version = parse_nccl_version(given)
        if said and version != next(iter(said)):
            raise ValueError(f"--nccl-version {given}: the logs say NCCL {next(iter(said))}; leave the option out "
                             f"or give the logs' version")
        return version, f"NCCL {version} (--nccl-version)"
    if said:
        return next(iter(said)), f"NCCL {next(iter(said))} (from the logs)"
    return LEGACY_NCCL_VERSION, (f"NCCL {LEGACY_NCCL_VERSION}: the logs do not say their version (no `NCCL version` "
                                 f"line, no nccl-tests header); give --nccl-version if it was another")


def prior_for(runs: list[NcclRun], request: CalibrationRequest) -> ClusterModel:
    """The prior the runs call for; a ValueError says what to change."""
    if not runs:
        raise ValueError("no runs in the logs")
    if request.intra not in ("nvswitch", "pcie"):
        raise ValueError(f"--intra {request.intra!r}: use nvswitch or pcie")
    if request.fabric not in ("rail", "fat-tree"):
        raise ValueError(f"--fabric {request.fabric!r}: use rail or fat-tree")
    for option, value in (("--gpus-per-server", request.gpus_per_server), ("--nics-per-server",
                                                                            request.nics_per_server)):
        if value is not None and not 1 <= value <= 64:
            raise ValueError(f"{option} {value}: give a whole number from 1 to 64")
    devices = sorted({r.device_name for r in runs if r.device_name})
    if len(devices) > 1:
        raise ValueError(f"the logs come from different GPUs ({', '.join(devices)}): a cluster file describes one "
                         f"kind of server; calibrate each kind on its own logs")
    g = request.gpus_per_server
    if g is None:
        multi = {r.gpus_per_server for r in runs if r.num_servers > 1}
        if len(multi) > 1:
            raise ValueError(f"the logs run {sorted(multi)} GPUs of each server: calibrate one kind of server, or "
                             f"give --gpus-per-server (the GPUs a server holds) when some runs use part of each")
        g = multi.pop() if multi else max(r.num_ranks for r in runs)
    bench = all(r.label for r in runs)  # `fabriclab collectives bench` tables: Gloo's ring, not NCCL
    version = LEGACY_NCCL_VERSION if bench else nccl_version_for(runs, request.nccl_version)[0]
    gpu_name = (devices or ["GPU"])[0] if not bench else "CPU"
    prior = prior_cluster(gpus_per_server=g, gpu_name=gpu_name, intra=request.intra, nic=request.nic,
                          nics_per_server=request.nics_per_server, fabric=request.fabric,
                          library="gloo" if bench else "nccl", nccl_version=version,
                          **(datasheet_for(gpu_name) if request.datasheet else {}))
    if request.nccl_env:
        check_nccl_env(request.nccl_env, "--nccl-env")
        prior = replace(prior, library=replace(prior.library, nccl_env=dict(request.nccl_env)))
    if request.tuner:
        prior = replace(prior, library=replace(prior.library, tuner=tuple(request.tuner)))
    if not bench and any(r.collective == "sendrecv" and r.num_servers > 1 for r in runs):
        # a sendrecv across servers runs on the few channels NCCL gives a remote peer: their rate is a
        # parameter (NCCL 2.29's own figure as the prior)
        prior = replace(prior, library=replace(prior.library,
                                               p2p_channel_bandwidth_Bps=P2P_PER_CHANNEL_NET_GBPS * 1e9))
    if not request.sharp:
        return prior
    if version == LEGACY_NCCL_VERSION:
        raise ValueError("--sharp: these logs run NCCL 2.7.8's model (they do not say their version, or they are "
                         "Gloo's), which fabriclab keeps without CollNet; give --nccl-version 2.9 or later")
    return replace(prior, network=replace(prior.network, sharp=True))


def datasheet_for(gpu_name: str) -> dict:
    """What a GPU's data sheet tells the prior: its HBM rate (the memory pass of every row) and the PCIe
    generation between it and its NIC. Hopper and Blackwell servers (HGX H100/H200/B200) attach their NICs
    over PCIe 5.0 x16: the default PCIe 4.0 x16 (28.8 GB/s) would cap 8 NDR NICs at 230 GB/s of ring busbw
    where nccl-tests#309 measures 469 GB/s on 2 servers. Unknown GPUs keep `prior_cluster`'s defaults."""
    gpu = gpu_for_name(gpu_name)
    if gpu is None:
        return {}
    out = {"memory_bandwidth_Bps": gpu.memory_bandwidth_Bps}
    if any(key in gpu_name.upper() for key in ("H100", "H200", "H800", "H20", "B200", "B300", "GB200", "GB300")):
        out["pcie"] = link_preset("PCIe5x16")  # HGX H100/H200/B200 specifications: PCIe Gen5 x16 per NIC
    return out


def calibrate_cluster(request: CalibrationRequest) -> Calibration:
    """Fit the prior to the runs (and the rows of the held runs outside the hold-out range)."""
    runs, held = list(request.runs), list(request.held)
    prior = prior_for(runs + held, request)
    keep, fit_runs = None, runs
    if request.hold_out_range is not None:
        if not held:
            raise ValueError("--hold-out-sizes applies to the --check logs: give at least one --check LOG")
        lo, hi = request.hold_out_range
        held_ids = {id(r) for r in held}
        keep = lambda run, size: id(run) not in held_ids or not lo <= size <= hi  # noqa: E731
        fit_runs = runs + held
    result = calibrate(fit_runs, prior, keep=keep, estimates_fit=request.estimates_fit)
    residuals = list(result.residuals)
    if request.hold_out_range is None:
        residuals += check(result.cluster, held)
    fitted_summary, held_summary = summary(residuals, held_out=False), summary(residuals, held_out=True)
    fit_info = {**request.record, "rows_fitted": sum(not r.held_out for r in residuals),
                "parameters": {p.name: {"value": p.value, "prior": p.prior, "fitted": p.determined,
                                        "at_bound": p.at_bound, "leverage": p.leverage,
                                        "reach_s": p.reach_s} for p in result.params},
                "fitted_rows": fitted_summary, "held_out_rows": held_summary}
    cluster = replace(result.cluster, name=request.name, fit=fit_info,
                      description=f"calibrated from {', '.join(request.log_names)} "
                                  f"(prior: {prior.description.removeprefix('prior: ')})")
    if request.check_nic:
        check_nic(cluster, residuals, request.nic)
    cluster = replace(cluster, fit={**cluster.fit, "fit_scatter": fit_scatter(residuals)})
    residuals = with_ranges(cluster, residuals, held)
    covered = coverage(residuals)
    cluster = replace(cluster, fit={**cluster.fit, "held_out_coverage": covered})
    return Calibration(cluster=cluster, params=result.params, residuals=residuals, fitted_summary=fitted_summary,
                       held_summary=held_summary, coverage=covered, version_note=_version_note(runs + held, request))


def fit_scatter(residuals: list) -> float:
    """exp(RMS of log(measured / fitted time)) over the fitted rows NCCL runs with an algorithm this model
    costs (ring, tree, PAT, point-to-point): how far the fitted model misses the rows it was fitted to. A
    prediction from those parameters can miss by as much, so the printed range spans its 90 % interval
    (`nccl/band.py`); 1.0 when no such row was fitted."""
    logs = [math.log1p(r.error_pct / 100) for r in residuals
            if not r.held_out and r.choice.split("/")[0] in COSTED and r.error_pct > -100]
    return math.exp(math.sqrt(sum(v * v for v in logs) / len(logs))) if logs else 1.0


NIC_MISFIT_PCT = 20.0
"""Largest |error| of the fitted multi-server rows >= NIC_ROWS_BYTES before the NIC is called contradicted."""
NIC_ROWS_BYTES = 64 << 20


def check_nic(cluster: ClusterModel, residuals: list, nic) -> None:
    """Refuse a fit whose large multi-server rows, which the NIC decides, miss by more than NIC_MISFIT_PCT:
    the logs contradict the NIC given (e.g. `--nic NDR` on HDR logs: +37.6 % at 16 GPUs), and a cluster
    file from it would carry the wrong network. The message gives the numbers."""
    g = cluster.server.gpus_per_server
    rows = [r for r in residuals if not r.held_out and r.servers(g) > 1 and r.size_bytes >= NIC_ROWS_BYTES]
    if not rows:
        return
    worst = max(rows, key=lambda r: abs(r.error_pct))
    if abs(worst.error_pct) <= NIC_MISFIT_PCT:
        return
    side = "faster" if worst.error_pct > 0 else "slower"
    per = cluster.server.nics_per_server
    raise ValueError(
        f"the logs contradict --nic {nic.name} ({per} x {nic.bandwidth_Bps * 8 / 1e9:g} Gb/s per server): at "
        f"{worst.num_gpus} GPUs ({worst.servers(g)} servers), "
        f"{worst.size_bytes / (1 << 20):,.0f} MiB the fitted "
        f"model gives {worst.predicted_busbw_GBps:.3g} GB/s busbw where {Path(worst.source).name} measured "
        f"{worst.measured_busbw_GBps:.3g} ({worst.error_pct:+.1f} %, the model {side}; more than "
        f"{NIC_MISFIT_PCT:g} % on rows >= {NIC_ROWS_BYTES >> 20} MiB across servers, which the NIC decides, "
        f"NIC efficiency fitted {cluster.server.nic_efficiency:.2f}): give the NIC the logs were measured on "
        f"(--nic HDR for Azure ND A100 v4) or the right --nics-per-server; for a what-if with another NIC "
        f"calibrate on the real one and swap it: `fabriclab plan --cluster FILE --nic {nic.name}`")


def with_ranges(cluster: ClusterModel, residuals: list, runs: list[NcclRun]) -> list:
    """The residuals with the printed busbw range of every held-out row (`nccl/band.py`)."""
    by_run = {(r.source, r.num_ranks, r.collective): r for r in runs}
    ranges = {}
    for key in {(r.source, r.num_gpus, r.collective) for r in residuals if r.held_out}:
        run = by_run.get(key)
        if run is None or run.num_ranks < 2:
            continue
        seen = seen_by(cluster, run)
        rows = predict_nccl_table(seen, run.num_ranks, [r.size_bytes for r in run.rows], run.collective,
                                  gpus_per_process=run.gpus_per_process)
        bands = row_bands(seen, run.num_ranks, rows, run.collective, gpus_per_process=run.gpus_per_process)
        ranges.update({(*key, row["size_bytes"]): b for row, b in zip(rows, bands)})
    out = []
    for r in residuals:
        b = ranges.get((r.source, r.num_gpus, r.collective, r.size_bytes)) if r.held_out else None
        out.append(r if b is None else replace(r, busbw_low_GBps=b.busbw_low_GBps, busbw_high_GBps=b.busbw_high_GBps))
    return out


def inside(r) -> bool:
    """Whether a held-out row's measured busbw lies in its printed range (to the logs' 2 decimals)."""
    return r.busbw_low_GBps - 0.005 <= r.measured_busbw_GBps <= r.busbw_high_GBps + 0.005


def coverage(residuals: list) -> list[dict]:
    """Per GPU count of the held-out rows (and all together, `num_gpus` None): rows with a range, how many
    of them hold the measured busbw, and that share."""
    rows = [r for r in residuals if r.held_out and r.busbw_low_GBps is not None]
    out = []
    for gpus in [*sorted({r.num_gpus for r in rows}), None]:
        sel = [r for r in rows if gpus is None or r.num_gpus == gpus]
        if sel and (gpus is not None or len(out) > 1):
            hit = sum(inside(r) for r in sel)
            out.append({"num_gpus": gpus, "rows": len(sel), "inside": hit, "share": hit / len(sel)})
    return out


def _version_note(runs: list[NcclRun], request: CalibrationRequest) -> str:
    if all(r.label for r in runs):
        return "Gloo's ring (fabriclab's own benchmark tables): no NCCL version"
    return nccl_version_for(runs, request.nccl_version)[1]
