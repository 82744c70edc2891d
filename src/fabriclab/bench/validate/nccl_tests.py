"""Fit small, predict large on every cluster of the nccl-tests corpus, and the errors per size band.

For each cluster of `examples/nccl-corpus` (`nccl_corpus.py`) the calibration of `fabriclab calibrate
nccl-tests` runs on its smaller runs (or on the sizes outside the held-out range of its one run) and
predicts the rest; every predicted row keeps its error and whether the printed busbw range holds the
measurement. `band_summary` groups them per size band (fit.BANDS: 64-512 KB, 1-16 MB, >= 64 MB, with the
goals 35 / 25 / 10 %) and per cluster; `models="baseline"` runs the calibration without the corpus's
mechanisms (`MECHANISMS`), so one command shows the bands before and after.

Try it: `fabriclab validate nccl-tests --models both`.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace

import numpy as np

from fabriclab.bench.validate.nccl_corpus import CorpusCluster, check_cluster_file
from fabriclab.nccl.calibration import calibrate_cluster, inside
from fabriclab.nccl.fit import BANDS

MECHANISMS = ("datasheet", "estimates")
"""What the corpus added to the calibration (`baseline` leaves them out):
datasheet: the prior takes the GPU's HBM rate and PCIe generation from its data sheet
(`nccl.calibration.datasheet_for`);
estimates: rows NCCL runs with an algorithm it costs by its own estimate (NVLS-tree on H100 servers) stay
out of the fit (`nccl.fit.calibrate`)."""


@dataclass(frozen=True, kw_only=True)
class ClusterResult:
    """One cluster's predicted rows, or why it could not be judged."""

    name: str
    """Corpus folder."""
    model: str
    """baseline or mechanisms."""
    split: str
    """How it was split (`fit 16 -> predict 32, 64 GPUs`)."""
    gpus_per_server: int
    """GPUs per server."""
    rows: tuple = ()
    """Residuals (`nccl.fit.Residual`) of the predicted rows."""
    version_note: str = ""
    """Which NCCL version the model ran."""
    error: str = ""
    """Why the cluster could not be judged (empty when it was)."""
    degraded: str = ""
    """Why the cluster was measured degraded (`health.degraded` of its manifest: the poster's or the
    maintainers' words); empty for a healthy one. Its rows stay in the tables, out of the `all` counts."""

    def as_dict(self) -> dict:
        return {"cluster": self.name, "model": self.model, "split": self.split, "version": self.version_note,
                "error": self.error, "degraded": self.degraded, "rows": [{
                    "gpus": r.num_gpus, "servers": r.servers(self.gpus_per_server), "size_bytes": r.size_bytes,
                    "collective": r.collective, "choice": r.choice, "measured_busbw_GBps": r.measured_busbw_GBps,
                    "predicted_busbw_GBps": r.predicted_busbw_GBps, "error_pct": r.error_pct,
                    "busbw_low_GBps": r.busbw_low_GBps, "busbw_high_GBps": r.busbw_high_GBps,
                    "inside": None if r.busbw_low_GBps is None else bool(inside(r))} for r in self.rows]}


def split_words(cluster: CorpusCluster) -> str:
    """`16 -> 32,64 GPUs` (fit -> predict) or `64KB-16MB of 16` (one run, its sizes held out)."""
    m = cluster.manifest
    if cluster.split == "gpus":
        if all(isinstance(x, int) for x in m["fit"] + m["predict"]):
            return f"{','.join(map(str, m['fit']))} -> {','.join(map(str, m['predict']))} GPUs"
        word = {r.file: f"{r.collective} {r.gpus}" for r in cluster.runs}
        return f"{', '.join(word.get(x, str(x)) for x in m['fit'])} -> {', '.join(word.get(x, str(x)) for x in m['predict'])}"
    lo, hi = m["hold_out"]
    return f"{lo >> 10}KB-{hi >> 20}MB of {cluster.runs[0].gpus}"


def validate_cluster(cluster: CorpusCluster, model: str = "mechanisms") -> ClusterResult:
    """Calibrate on the cluster's fitted runs and predict the others."""
    check_cluster_file(cluster)  # its GPU, as the manifest says it: refused, not judged
    request = cluster.request()
    if model == "baseline":
        request = replace(request, datasheet=False, estimates_fit=True)
    base = ClusterResult(name=cluster.name, model=model, split=split_words(cluster),
                         gpus_per_server=cluster.hardware["gpus_per_server"],
                         degraded=cluster.degraded)
    try:
        calibration = calibrate_cluster(request)
    except ValueError as exc:
        return replace(base, error=str(exc))
    predicted = {run.source for run in request.held}
    rows = tuple(r for r in calibration.residuals if r.held_out and r.source in predicted)
    return replace(base, rows=rows, version_note=calibration.version_note)


def band_of(size_bytes: int) -> str | None:
    """The band (fit.BANDS) a size falls in, None between bands."""
    for name, lo, hi, _ in BANDS:
        if size_bytes >= lo and (hi is None or size_bytes <= hi):
            return name
    return None


def band_summary(results: list[ClusterResult], *, min_servers: int = 1) -> list[dict]:
    """Per band and cluster (and the healthy clusters together, `cluster` "all"; with the degraded ones
    too, "all+degraded", where there are any): predicted rows on at least `min_servers` servers, mean,
    median and max |error| %, whether the median and the max are within the band's goal, and how many
    rows the printed range holds."""
    out = []
    for band, _, _, goal in BANDS:
        healthy, every, rows = [], [], []
        for res in results:
            sel = [r for r in res.rows if band_of(r.size_bytes) == band
                   and r.servers(res.gpus_per_server) >= min_servers]
            if sel:
                row = _band_row(band, goal, res.name, res.model, sel)
                row["degraded"] = bool(res.degraded)
                rows.append(row)
                every += sel
                healthy += [] if res.degraded else sel
        out += rows
        fine = [r for r in rows if not r["degraded"]]
        totals = [("all", healthy, fine)] + ([("all+degraded", every, rows)] if len(fine) < len(rows) else [])
        for name, sel, members in totals:
            if not sel:
                continue
            total = _band_row(band, goal, name, results[0].model, sel, clusters=len(members))
            total["clusters_within_goal"] = sum(row["within_goal"] for row in members)
            total["clusters_median_within_goal"] = sum(row["median_within_goal"] for row in members)
            out.append(total)
    return out


def band_words(row: dict) -> tuple[str, ...]:
    """Lines for a band's `all` row (clusters within the goal, rows inside their ranges); for its
    `all+degraded` row, the share of rows with the degraded clusters counted."""
    share = row["inside"] / row["ranged"] if row["ranged"] else 0.0
    if row["cluster"] == "all+degraded":
        return (f"  counting degraded clusters: {row['inside']} of {row['ranged']} rows ({share:.0%}), "
                f"{row['clusters_median_within_goal']}/{row['clusters']} (median row)",)
    return (f"{row['band']}, {row['model']}: within {row['goal_pct']:g} % in {row['clusters_median_within_goal']}/"
            f"{row['clusters']} clusters (median row), {row['clusters_within_goal']} (every row);",
            f"  the ranges hold {row['inside']} of {row['ranged']} rows ({share:.0%})")


COVERAGE_GOAL = 0.9
"""Share of the predicted rows the printed ranges should hold (issue: >= 90 % of rows)."""


def coverage(summary: list[dict]) -> list[dict]:
    """Over every band, per model: the rows the ranges hold across the healthy clusters (and with the
    degraded ones), and per healthy cluster its own share, so that one cluster of many rows does not
    decide the figure alone: how many clusters' ranges hold at least COVERAGE_GOAL of their rows."""
    out = []
    for model in dict.fromkeys(row["model"] for row in summary):
        per: dict[str, list[int]] = {}
        degraded: dict[str, list[int]] = {}
        for row in summary:
            if row["model"] != model or row["cluster"] in ("all", "all+degraded"):
                continue
            into = degraded if row["degraded"] else per
            counts = into.setdefault(row["cluster"], [0, 0])
            counts[0] += row["inside"]
            counts[1] += row["ranged"]
        inside, ranged = (sum(c[i] for c in per.values()) for i in (0, 1))
        shares = {name: c[0] / c[1] for name, c in per.items() if c[1]}
        out.append({"model": model, "inside": inside, "ranged": ranged,
                    "inside_with_degraded": inside + sum(c[0] for c in degraded.values()),
                    "ranged_with_degraded": ranged + sum(c[1] for c in degraded.values()),
                    "clusters": len(shares), "clusters_at_goal": sum(v >= COVERAGE_GOAL for v in shares.values()),
                    "cluster_shares": shares})
    return out


def coverage_words(row: dict) -> tuple[str, ...]:
    """The lines for one model's `coverage` row (`coverage_line`, wrapped to 78 columns)."""
    return tuple(textwrap.wrap(coverage_line(row), 78, subsequent_indent="  "))


def coverage_line(row: dict) -> str:
    """One model's `coverage` row in words, on one line."""
    share = row["inside"] / row["ranged"] if row["ranged"] else 0.0
    every = row["inside_with_degraded"] / row["ranged_with_degraded"] if row["ranged_with_degraded"] else 0.0
    lowest = sorted(row["cluster_shares"].items(), key=lambda kv: kv[1])[:3]
    text = (f"every band, {row['model']}: the ranges hold {row['inside']} of {row['ranged']} rows ({share:.0%}) "
            f"of the healthy clusters; {row['clusters_at_goal']} of {row['clusters']} clusters hold >= "
            f"{COVERAGE_GOAL:.0%} of their own rows (fewest: " + ", ".join(f"{n} {v:.0%}" for n, v in lowest) + ")")
    if row["ranged_with_degraded"] > row["ranged"]:
        text += (f"; counting degraded clusters: {row['inside_with_degraded']} of {row['ranged_with_degraded']} "
                 f"rows ({every:.0%})")
    return text


def _band_row(band: str, goal: float, name: str, model: str, rows: list, clusters: int | None = None) -> dict:
    errors = np.abs([r.error_pct for r in rows])
    ranged = [r for r in rows if r.busbw_low_GBps is not None]
    row = {"band": band, "goal_pct": goal, "cluster": name, "model": model, "rows": len(rows),
           "mean_abs_error_pct": float(errors.mean()), "median_abs_error_pct": float(np.median(errors)),
           "max_abs_error_pct": float(errors.max()), "within_goal": bool(errors.max() <= goal),
           "median_within_goal": bool(np.median(errors) <= goal), "ranged": len(ranged),
           "inside": sum(inside(r) for r in ranged),
           "servers": sorted({r.num_gpus for r in rows})}
    if clusters is not None:
        row["clusters"] = clusters
    return row
