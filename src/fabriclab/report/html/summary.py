"""The report's summary, at the top of the page: the newest plan's answer (CNN or LLM), what was measured
and what was predicted (every kind counted), and the worst errors, each linked to its section and record.

Measured: records of runs on this machine or of real logs (training, benchmarks, the emulated cluster,
nccl-tests logs fitted). Predicted: simulations, what-ifs and plans. Worst errors: the largest misses of
the newest comparison of each kind (published numbers, calibration bands, simulator vs measured).

Try it: `fabriclab report --out report/` (the summary is the page's first section).
"""

from __future__ import annotations

import math

from fabriclab.report.calibrate import band_summary
from fabriclab.report.html.parts import esc
from fabriclab.report.store_views import Stored, command_of

# Record kinds by what they are: measured here (or on the logs' cluster), or predicted by a model.
MEASURED = ("train.bench", "train.llm", "bench.train", "bench.train_llm", "bench.fabrics", "bench.overhead",
            "collectives.bench", "stencil.run", "stencil.scale", "calibrate.nccl-tests", "calibrate.step",
            "validate.emulated", "validate.collectives", "validate.llm")
PREDICTED = ("plan", "plan.llm", "whatif", "whatif.llm", "whatif.reproduce", "simulate.sweep", "simulate.collective",
             "simulate.cluster", "stencil.simulate", "chakra.run", "bench.astra_sim", "validate.published",
             "validate.nccl-tests")
# The section each plan kind's answer is drawn in.
PLAN_SECTIONS = {"plan": "plan", "plan.llm": "llm-plan"}
WORST = 3


def _kinds(records: list[Stored], kinds: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for s in records:
        if s.kind in kinds:
            counts[s.kind] = counts.get(s.kind, 0) + 1
    return ", ".join(f"{n} <code>{esc(k)}</code>" for k, n in counts.items()) or "nothing yet"


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _published_worst(stored: Stored) -> list[str]:
    rows = stored.record["results"]["rows"]
    sets = [k[:-len("_error")] for k in rows[0] if k.endswith("_error")]
    best = sets[-1]  # the last model set is the one with the mechanisms
    missed = sorted((r for r in rows if _finite(r.get(f"{best}_error")) and not r.get(f"{best}_within_goal")),
                    key=lambda r: -abs(r[f"{best}_error"]))
    predicted = [r for r in rows if _finite(r.get(f"{best}_error"))]
    within = sum(bool(r.get(f"{best}_within_goal")) for r in predicted)
    head = (f'Published numbers (<a href="#published">section</a>, <a href="#rec-{stored.id}">record '
            f"{stored.id}</a>): {within} of {len(predicted)} predicted rows within the goal, "
            f"{len(rows) - len(predicted)} not predicted")
    worst = "; ".join(f"{esc(r['key'])} {r[f'{best}_error']:+.1f} "
                      f"{'pt' if r.get('error_kind') == 'points' else '%'}" for r in missed[:WORST])
    return [head + (f"; worst: {worst}" if worst else "")]


def _calibrate_worst(stored: Stored) -> list[str]:
    bands = sorted(band_summary(stored.record["results"]["residuals"]), key=lambda b: -b["max_abs_error_pct"])
    worst = "; ".join(f"{b['num_gpus']} GPUs {esc(b['band'])} {b['max_abs_error_pct']:.1f} %" for b in bands[:WORST])
    return [f'Calibration (<a href="#calibrate">section</a>, <a href="#rec-{stored.id}">record {stored.id}</a>): '
            f"largest busbw errors {worst}"] if bands else []


def _fabrics_worst(stored: Stored) -> list[str]:
    results = stored.record["results"]
    rows = results["rows"] if isinstance(results, dict) else results
    errs = sorted((r for r in rows if _finite(r.get("sim_err_pct"))), key=lambda r: -abs(r["sim_err_pct"]))
    worst = "; ".join(f"{esc(r['fabric'])} {r['workers']} workers {r['sim_err_pct']:+.1f} %" for r in errs[:WORST])
    return [f'Simulator vs emulated training (<a href="#throughput">section</a>, <a href="#rec-{stored.id}">'
            f"record {stored.id}</a>): worst {worst}"] if errs else []


def _corpus_coverage(stored: Stored) -> list[str]:
    rows = [b for b in stored.record["results"]["bands"] if b["cluster"] == "all" and b["ranged"]
            and b.get("model", "mechanisms") == "mechanisms"]  # the model as it is (not --models both's baseline)
    held = "; ".join(f"{esc(b['band'])} {b['inside']}/{b['ranged']} rows in range, {b['clusters_median_within_goal']}/"
                     f"{b['clusters']} clusters within {b['goal_pct']:g} %" for b in rows)
    from fabriclab.bench.validate.nccl_tests import COVERAGE_GOAL

    every = [c for c in stored.record["results"].get("coverage", []) if c["model"] == "mechanisms" and c["ranged"]]
    held += "".join(f"; every band {c['inside']}/{c['ranged']} rows in range, {c['clusters_at_goal']}/{c['clusters']} "
                    f"clusters with >= {COVERAGE_GOAL * 100:g} % of theirs" for c in every)
    return [f'NCCL model on the nccl-tests corpus (<a href="#nccl-corpus">section</a>, <a href="#rec-{stored.id}">'
            f"record {stored.id}</a>): {held}"] if rows else []


WORST_OF = {"validate.published": _published_worst, "calibrate.nccl-tests": _calibrate_worst,
            "bench.fabrics": _fabrics_worst, "validate.nccl-tests": _corpus_coverage}


def _answer(plans: list[Stored]) -> list[str]:
    """The newest plan's recommendations (CNN or LLM, whichever ran last), the page's first lines."""
    if not plans:
        return []
    plan = max(plans, key=lambda s: s.id)
    recs = (plan.record.get("results") or {}).get("recommendations") or []
    texts = [r if isinstance(r, str) else r.get("text") for r in recs if isinstance(r, (str, dict))]
    texts = [t for t in texts if t]
    if not texts:
        return []
    what = "LLM plan" if plan.kind == "plan.llm" else "plan"
    return [f'<li><b>Recommendation</b> (the newest {what}, <a href="#{PLAN_SECTIONS[plan.kind]}">section</a>, '
            f'<a href="#rec-{plan.id}">record {plan.id}</a>, <code>{esc(command_of(plan.record))}</code>):'
            f'<ul class="answer">' + "".join(f"<li>{esc(t)}</li>" for t in texts) + "</ul></li>"]


def summary(records: list[Stored]) -> str:
    """The summary section's HTML."""
    newest: dict[str, Stored] = {}
    for s in sorted(records, key=lambda s: s.id):
        newest[s.kind] = s
    items = _answer([newest[k] for k in PLAN_SECTIONS if k in newest])
    items += [f"<li><b>Measured</b>: {_kinds(records, MEASURED)}.</li>",
              f"<li><b>Predicted</b>: {_kinds(records, PREDICTED)}.</li>"]
    worst = []
    for kind, fn in WORST_OF.items():
        if kind in newest:
            try:
                worst += fn(newest[kind])
            except (KeyError, TypeError, ValueError, IndexError):
                continue
    if worst:
        items.append("<li><b>Worst errors</b>:<ul>" + "".join(f"<li>{w}.</li>" for w in worst) + "</ul></li>")
    return (f'<section id="summary"><h2>Summary</h2><ul class="summary">{"".join(items)}</ul></section>')
