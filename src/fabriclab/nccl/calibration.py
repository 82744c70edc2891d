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

from dataclasses import dataclass, field, replace

from fabriclab.fabric.cluster import ClusterModel, prior_cluster
from fabriclab.fabric.links import Link
from fabriclab.nccl.fit import calibrate, check, summary
from fabriclab.nccl.logs import NcclRun


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
    name: str = "cluster"
    """Name of the cluster written."""
    log_names: tuple[str, ...] = ()
    """The fitted logs' file names (for the description)."""
    record: dict = field(default_factory=dict)
    """Extra facts for the fit record (e.g. the log paths as given)."""


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The calibrated cluster and what the fit found."""

    cluster: ClusterModel
    params: list
    residuals: list
    fitted_summary: list
    held_summary: list


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
            raise ValueError(f"the logs come from servers of {sorted(multi)} GPUs: calibrate one kind of server")
        g = multi.pop() if multi else max(r.num_ranks for r in runs)
    bench = all(r.label for r in runs)  # `fabriclab collectives bench` tables: Gloo's ring, not NCCL
    return prior_cluster(gpus_per_server=g, gpu_name=(devices or ["GPU"])[0] if not bench else "CPU",
                         intra=request.intra, nic=request.nic, nics_per_server=request.nics_per_server,
                         fabric=request.fabric, library="gloo" if bench else "nccl")


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
    result = calibrate(fit_runs, prior, keep=keep)
    residuals = list(result.residuals)
    if request.hold_out_range is None:
        residuals += check(result.cluster, held)
    fitted_summary, held_summary = summary(residuals, held_out=False), summary(residuals, held_out=True)
    fit_info = {**request.record, "rows_fitted": sum(not r.held_out for r in residuals),
                "parameters": {p.name: {"value": p.value, "prior": p.prior, "fitted": p.determined,
                                        "at_bound": p.at_bound} for p in result.params},
                "fitted_rows": fitted_summary, "held_out_rows": held_summary}
    cluster = replace(result.cluster, name=request.name, fit=fit_info,
                      description=f"calibrated from {', '.join(request.log_names)} "
                                  f"(prior: {prior.description.removeprefix('prior: ')})")
    return Calibration(cluster=cluster, params=result.params, residuals=residuals, fitted_summary=fitted_summary,
                       held_summary=held_summary)
