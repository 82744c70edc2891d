"""Fit a cluster model on the small emulated cluster's tables, predict the larger one's, and compare.

The measured rows become nccl-tests runs (`nccl.logs.NcclRun`, one per op and host count, one rank per
host, label `native`: a `collectives bench` table), so the fit is exactly `fabriclab calibrate
nccl-tests` on such tables: `nccl.calibration.calibrate_cluster` builds the Gloo-ring prior (the emulated
link at its TCP payload share as the NIC, one rank per server) and fits it. With `joint` one cluster is
fitted to the tables of every op; where that fit refuses (an op the model does not predict), each op gets
its own fit, and an op no fit accepts is measured but not predicted (the reason is kept). The fitted
cluster then predicts every size on the larger host count (`nccl.predict.collective_times`); it never
sees those rows.

A row's time is the median of its iterations (other jobs on a shared machine only ever add time);
busbw = size / time x the op's factor; error = predicted busbw / measured busbw - 1, as `calibrate`
reports it (a positive error: the model is too fast).

Try it: `sudo fabriclab validate collectives --ops allgather,alltoall --hosts 4 --calibrate-hosts 2`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabriclab.bench.validate.collectives.config import BANDS, CheckConfig
from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.fabric.links import Link
from fabriclab.nccl.calibration import Calibration, CalibrationRequest, calibrate_cluster
from fabriclab.nccl.logs import NcclRow, NcclRun
from fabriclab.nccl.predict import collective_times

FIT, CHECK = "fit", "check"


@dataclass(frozen=True, kw_only=True)
class Fit:
    """One fit: the ops whose small-cluster tables it used, and its calibration or why there is none."""

    ops: tuple[str, ...]
    """Ops fitted together."""
    calibration: Calibration | None
    """The calibrated cluster and its parameters; None when the fit refused."""
    error: str = ""
    """Why it refused (the fit's ValueError)."""


def measured_time_us(row: dict) -> float:
    """The row's time: the median of its iterations (the mean where a row has no median)."""
    return float(row.get("time_us_median", row["time_us"]))


def bench_run(op: str, num_hosts: int, rows: list[dict], source: str) -> NcclRun:
    """The measured rows of one op as the run `calibrate nccl-tests` reads from a `collectives bench` table."""
    table = []
    for row in sorted((r for r in rows if r["op"] == op and r["size_bytes"] > 0), key=lambda r: r["size_bytes"]):
        time_us = measured_time_us(row)
        algbw = row["size_bytes"] / (time_us * 1e-6) / 1e9
        table.append(NcclRow(size_bytes=row["size_bytes"], count=row["count"], dtype=row["dtype"],
                             redop=row["redop"], root=row["root"], time_us=time_us, algbw_GBps=algbw,
                             busbw_GBps=algbw * bus_bandwidth_factor(op, num_hosts), error=str(row["num_wrong"])))
    return NcclRun(source=f"{source} [{op}, {num_hosts} hosts]", collective=op,
                   hosts=tuple(f"host{r}" for r in range(num_hosts)), label="native", layout_assumed=True,
                   rows=tuple(table))


def fit(config: CheckConfig, runs: dict[str, NcclRun]) -> list[Fit]:
    """One fit of all ops (joint), or one per op when joint is off or refused."""
    nic = Link(name=f"emulated {config.link} / {config.dilation:g}", bandwidth_Bps=config.rate_Bps,
               efficiency=config.efficiency)

    def one(ops: tuple[str, ...]) -> Fit:
        # the NIC is the link fabriclab shaped itself: a shortfall is Gloo's (half-duplex pairs), not the NIC's
        request = CalibrationRequest(runs=tuple(runs[op] for op in ops), nic=nic, gpus_per_server=1, check_nic=False,
                                     name=f"emulated-star-{config.calibrate_hosts}",
                                     log_names=tuple(runs[op].source for op in ops))
        try:
            return Fit(ops=ops, calibration=calibrate_cluster(request))
        except ValueError as exc:
            return Fit(ops=ops, calibration=None, error=str(exc))

    ops = tuple(op for op in config.ops if runs[op].rows)
    if config.joint and len(ops) > 1:
        joint = one(ops)
        if joint.calibration is not None:
            return [joint]
        return [joint] + [one((op,)) for op in ops]
    return [one((op,)) for op in ops]


def predicted_rows(fitted: Fit, run: NcclRun, role: str) -> list[dict]:
    """Measured beside predicted for every row of `run` under the fitted cluster."""
    cluster = fitted.calibration.cluster
    sizes = [r.size_bytes for r in run.rows]
    times, picks = collective_times(cluster, run.num_ranks, sizes, run.collective)
    factor = bus_bandwidth_factor(run.collective, run.num_ranks)
    out = []
    for row, t, pick in zip(run.rows, times, picks):
        predicted_busbw = row.size_bytes / float(t) / 1e9 * factor
        out.append({"op": run.collective, "num_hosts": run.num_ranks, "role": role, "size_bytes": row.size_bytes,
                    "measured_us": row.time_us, "predicted_us": float(t) * 1e6,
                    "measured_busbw_GBps": row.busbw_GBps, "predicted_busbw_GBps": predicted_busbw,
                    "error_pct": (predicted_busbw / row.busbw_GBps - 1) * 100 if row.busbw_GBps > 0 else math.nan,
                    "time_error_pct": (float(t) * 1e6 / row.time_us - 1) * 100, "choice": pick,
                    "fit": "+".join(fitted.ops), "num_wrong": int(row.error)})
    return out


def unpredicted_rows(run: NcclRun, role: str) -> list[dict]:
    """The measured rows of an op no fit predicts."""
    return [{"op": run.collective, "num_hosts": run.num_ranks, "role": role, "size_bytes": r.size_bytes,
             "measured_us": r.time_us, "predicted_us": None, "measured_busbw_GBps": r.busbw_GBps,
             "predicted_busbw_GBps": None, "error_pct": None, "time_error_pct": None, "choice": "", "fit": "",
             "num_wrong": int(r.error)} for r in run.rows]


def compare(config: CheckConfig, small: dict, large: dict) -> dict:
    """Fit on `small` (the calibrate-hosts measurement), predict `large`: the record's results."""
    runs = {op: bench_run(op, config.calibrate_hosts, small["rows"], "measured") for op in config.ops}
    targets = {op: bench_run(op, config.hosts, large["rows"], "measured") for op in config.ops}
    fits = fit(config, runs)
    usable = {op: f for f in fits if f.calibration is not None for op in f.ops}
    rows = []
    for op in config.ops:
        for run, role in ((runs[op], FIT), (targets[op], CHECK)):
            rows += predicted_rows(usable[op], run, role) if op in usable else unpredicted_rows(run, role)
    return {"rows": rows, "summary": summarize(rows), "fits": [fit_record(f) for f in fits],
            "fit_mode": fit_mode(config, fits), "measurements": {str(config.calibrate_hosts): _facts(small),
                                                                 str(config.hosts): _facts(large)}}


def fit_mode(config: CheckConfig, fits: list[Fit]) -> str:
    """joint (one cluster for every op), per-op (asked for), or per-op after the joint fit refused."""
    if len(fits) == 1 and len(fits[0].ops) > 1 and fits[0].calibration is not None:
        return "joint"
    if config.joint and len(config.ops) > 1:
        return "per-op (the joint fit refused)"
    return "per-op"


def fit_record(fitted: Fit) -> dict:
    """A fit as plain data: ops, parameters (value, prior, whether the rows determined it) or the refusal."""
    if fitted.calibration is None:
        return {"ops": list(fitted.ops), "error": fitted.error, "parameters": None}
    cal = fitted.calibration
    return {"ops": list(fitted.ops), "error": "", "fitted_rows": cal.fitted_summary,
            "parameters": {p.name: {"value": p.value, "prior": p.prior, "fitted": p.determined,
                                    "at_bound": p.at_bound} for p in cal.params}}


def summarize(rows: list[dict]) -> list[dict]:
    """Per op and size band of the predicted (check) rows: rows, max and mean |error| of busbw."""
    out = []
    predicted = [r for r in rows if r["role"] == CHECK and r["error_pct"] is not None]
    for op in dict.fromkeys(r["op"] for r in rows):
        for band, lo, hi in BANDS:
            errors = [abs(r["error_pct"]) for r in predicted
                      if r["op"] == op and r["size_bytes"] >= lo and (hi is None or r["size_bytes"] <= hi)]
            if errors:
                out.append({"op": op, "band": band, "rows": len(errors), "max_abs_error_pct": max(errors),
                            "mean_abs_error_pct": sum(errors) / len(errors)})
    return out


def _facts(measured: dict) -> dict:
    return {k: v for k, v in measured.items() if k != "rows"}
