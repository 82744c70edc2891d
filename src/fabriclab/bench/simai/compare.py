"""SimAI beside fabriclab's collective model: per case the ns-3 times (median and spread of N runs), SimAI's
analytical time, fabriclab's prediction on the same machine (`cluster.simai_cluster`), their ratio.

SimAI's packet simulator is not repeatable run to run (up to 14-31 % on oversubscribed fabrics: its
README), so a case runs `repeats` times and the median is what is compared; a run that fails (a crash, the
time limit) is kept in the record with its reason and the case goes on with the others. `remeasure` puts
fabriclab's current prediction beside the ns-3 times of a record written before, so the model can be
re-checked without running SimAI.

Try it: `fabriclab bench simai --gpus 32 --oversubscription 1,4 --collectives allreduce --sizes 16MiB`.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from fabriclab.bench.simai.cluster import simai_cluster
from fabriclab.bench.simai.inputs import SimaiCase
from fabriclab.bench.simai.runner import run_analytical, run_ns3
from fabriclab.textfile import read_text

KIND = "bench.simai"
Progress = Callable[[str], None]


def make_cases(gpus: list[int], fabrics: list[str], oversubscriptions: list[int], collectives: list[str],
               sizes_bytes: list[int]) -> list[SimaiCase]:
    """Every combination, in that order of nesting (a ValueError names the first that SimAI cannot run)."""
    return [SimaiCase(num_gpus=g, fabric=f, oversubscription=r, collective=c, size_bytes=s)
            for g, f, r, c, s in itertools.product(gpus, fabrics, oversubscriptions, collectives, sizes_bytes)]


def predict(case: SimaiCase, *, routing: str | None = None) -> dict:
    """fabriclab's time of `case` on SimAI's machine, the algorithm/protocol it picks, the wall time."""
    from fabriclab.nccl.predict import collective_times

    start = time.perf_counter()
    cluster = simai_cluster(case.num_gpus, case.fabric, case.oversubscription, routing=routing,
                            collective=case.collective)
    times, picks = collective_times(cluster, case.num_gpus, [case.size_bytes], case.collective)
    return {"time_s": float(times[0]), "algorithm": picks[0], "wall_s": time.perf_counter() - start,
            "routing": getattr(cluster.network, "routing", "ideal")}


def ns3_summary(runs: list[dict]) -> dict:
    """Median, min, max and spread ((max - min) / median) of the runs that gave a time."""
    times = [r["time_s"] for r in runs if r.get("time_s") is not None]
    errors = [r["error"] for r in runs if r.get("error")]
    if not times:
        return {"median_s": None, "min_s": None, "max_s": None, "spread": None, "ok": 0, "failed": len(runs),
                "error": errors[0] if errors else "no run"}
    median = statistics.median(times)
    return {"median_s": median, "min_s": min(times), "max_s": max(times), "spread": (max(times) - min(times)) / median,
            "ok": len(times), "failed": len(runs) - len(times), "error": errors[0] if errors else ""}


def case_result(case: SimaiCase, runs: list[dict], analytical: dict, ours: dict) -> dict:
    """One case's record: the case, the ns-3 runs and their summary, the analytical run, fabriclab's."""
    summary = ns3_summary(runs)
    ratio = summary["median_s"] / ours["time_s"] if summary["median_s"] is not None else None
    return {"case": {**asdict(case), "label": case.label}, "ns3": {**summary, "runs": runs},
            "analytical": analytical, "fabriclab": ours, "ratio": ratio}


def measure(case: SimaiCase, simai: Path, *, repeats: int, timeout_s: float, routing: str | None = None,
            progress: Progress | None = None, position: str = "") -> dict:
    """`case` in ns-3 `repeats` times, in SimAI-Analytical once, and in fabriclab; `progress` gets a line per
    finished run."""
    say = progress or (lambda _line: None)
    runs = []
    for i in range(repeats):
        run = run_ns3(case, simai, timeout_s=timeout_s)
        runs.append(asdict(run))
        outcome = f"{run.time_s * 1e6:.3f} us" if run.time_s is not None else f"failed: {run.error[:120]}"
        say(f"{position}{case.label}: ns-3 run {i + 1}/{repeats} {outcome} ({run.wall_s:.1f} s, "
            f"{run.peak_rss_MiB:.0f} MiB){' ' + run.note if run.note else ''}")
    analytical = run_analytical(case, simai, timeout_s=timeout_s)
    outcome = f"{analytical.time_s * 1e6:.3f} us" if analytical.time_s is not None else \
        f"failed: {analytical.error[:120]}"
    say(f"{position}{case.label}: analytical {outcome} ({analytical.wall_s:.2f} s)")
    return case_result(case, runs, asdict(analytical), predict(case, routing=routing))


def campaign(cases: list[SimaiCase], simai: Path, *, repeats: int, timeout_s: float, routing: str | None = None,
             progress: Progress | None = None) -> dict:
    """Every case measured (`measure`), one run at a time; the results of the whole set."""
    start = time.perf_counter()
    results = [measure(case, simai, repeats=repeats, timeout_s=timeout_s, routing=routing, progress=progress,
                       position=f"[{i}/{len(cases)}] ") for i, case in enumerate(cases, 1)]
    return {"cases": results, "wall_s": time.perf_counter() - start, "measured_from": None}


# The agreement asked of the slowdown from 1:1 to an oversubscribed tree (fabriclab's over ns-3's).
SLOWDOWN_TOLERANCE = 0.25


def agreement(cases: list[dict]) -> dict:
    """How fabriclab's predictions meet ns-3's medians: the median and worst |ns-3 / fabriclab - 1| over the
    cases with a time (and the worst case's label), and for every oversubscribed case with its 1:1 twin
    (same GPUs, fabric, collective, size) the slowdown from 1:1 in each, within SLOWDOWN_TOLERANCE or not."""
    timed = [c for c in cases if c["ratio"] is not None]
    if not timed:
        return {"cases": 0}
    errors = [abs(c["ratio"] - 1.0) for c in timed]
    worst = max(range(len(timed)), key=errors.__getitem__)
    key = ("num_gpus", "fabric", "collective", "size_bytes")
    flat = {tuple(c["case"][k] for k in key): c for c in timed if c["case"]["oversubscription"] == 1}
    slowdowns = []
    for c in timed:
        base = flat.get(tuple(c["case"][k] for k in key))
        if c["case"]["oversubscription"] == 1 or base is None:
            continue
        ns3 = c["ns3"]["median_s"] / base["ns3"]["median_s"]
        ours = c["fabriclab"]["time_s"] / base["fabriclab"]["time_s"]
        slowdowns.append({"label": c["case"]["label"], "ns3": ns3, "fabriclab": ours,
                          "within": abs(ours / ns3 - 1.0) <= SLOWDOWN_TOLERANCE})
    return {"cases": len(timed), "median_error": float(statistics.median(errors)), "worst_error": errors[worst],
            "worst_case": timed[worst]["case"]["label"], "slowdowns": slowdowns,
            "slowdowns_within": sum(s["within"] for s in slowdowns)}


def load_measured(path: Path) -> dict:
    """The results of a record this benchmark wrote (`--json`); a ValueError says what is wrong with it."""
    try:
        record = json.loads(read_text(path, "--measured"))
    except OSError as exc:
        raise ValueError(f"--measured {path}: cannot read it ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--measured {path}: not JSON ({exc.msg} at line {exc.lineno}); give a record that "
                         f"`fabriclab bench simai --json FILE` wrote") from None
    results = record.get("results") if isinstance(record, dict) else None
    if not isinstance(record, dict) or record.get("kind") != KIND or not isinstance(results, dict) or \
            not isinstance(results.get("cases"), list):
        raise ValueError(f"--measured {path}: not a record of kind {KIND} with results.cases; give a record that "
                         f"`fabriclab bench simai --json FILE` wrote")
    return record


def remeasure(record: dict, *, source: str, routing: str | None = None) -> dict:
    """The stored cases of `record` (`load_measured`) with their ns-3 and analytical results as stored and
    fabriclab's prediction made now."""
    results = []
    for i, stored in enumerate(record["results"]["cases"]):
        try:
            fields = {k: stored["case"][k] for k in ("num_gpus", "fabric", "oversubscription", "collective",
                                                     "size_bytes")}
            case = SimaiCase(**fields)
            runs = list(stored["ns3"]["runs"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"--measured {source}: case {i} lacks {exc}; give a record that `fabriclab bench "
                             f"simai --json FILE` wrote") from None
        except ValueError as exc:
            raise ValueError(f"--measured {source}: case {i}: {exc}") from None
        results.append(case_result(case, runs, stored.get("analytical") or {}, predict(case, routing=routing)))
    return {"cases": results, "wall_s": 0.0, "measured_from": source,
            "measured_created_utc": record.get("created_utc")}
