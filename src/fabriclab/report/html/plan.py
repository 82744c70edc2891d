"""Report sections: `plan` (how much network to buy) and the papers' published numbers beside fabriclab's.

Plan (`plan`): every fabric / topology option's scaling factor against its network cost, the Pareto
frontier, the target, and the one-line recommendation per GPU count. Published (`validate.published`):
each number the papers give (Samsi et al.; Zhang, Li, Tanimura, Nakada; Awan et al.; Zhang et al.;
Horovod's documentation) beside fabriclab's prediction of it by each model set, with the error.

Try it: `fabriclab plan --gpus 64,256,512 && fabriclab validate published && fabriclab report --out report/`.
"""

from __future__ import annotations

import math

from fabriclab.report.html.parts import (Section, dollar_axis, esc, figure, log_axis, min_span, new_figure, num,
                                         rows_table, safely, series_style, source, table)
from fabriclab.report.store_views import Stored, result_rows

# Plan columns shown for the Pareto options, in this order, when the rows have them.
PLAN_COLUMNS = ("model", "fabric", "topology", "bisection", "gpus", "algo", "scaling_factor", "images_per_s",
                "network_usd", "network_share", "usd_per_image_per_s")
PLAN_HEADERS = {"scaling_factor": "scaling", "images_per_s": "images/s", "network_usd": "network $",
                "network_share": "network share", "usd_per_image_per_s": "$ per image/s"}
# Names the model sets of `validate published` go by in the report.
MODEL_SETS = {"baseline": "baseline model", "mechanisms": "with mechanisms"}
UNIT_SUFFIX = {"%": " %", "x": "x"}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _cost_key(row: dict) -> str | None:
    for key in ("network_usd", *(k for k in row if k.startswith("network_cost")), *(k for k in row if "cost" in k)):
        if key in row and _finite(row[key]):
            return key
    return None


def _plan_one(stored: Stored) -> str:
    results, config = stored.record["results"], stored.record.get("config") or {}
    rows = result_rows(results)
    texts = [r["text"] for r in results.get("recommendations") or [] if isinstance(r, dict) and r.get("text")]
    texts += [results["recommendation"]] if isinstance(results.get("recommendation"), str) else []
    out = "".join(f'<p class="answer">{esc(t)} (<a href="#rec-{stored.id}">record {stored.id}</a>)</p>' for t in texts)
    if config.get("price_label") or config.get("prices"):
        out += f"<p>Prices: {esc(config.get('price_label', ''))} ({esc(config.get('prices', ''))}).</p>"
    cost = _cost_key(rows[0]) if rows else None
    if not cost or "scaling_factor" not in rows[0]:
        return out + rows_table(stored)
    groups = list(dict.fromkeys(r.get("gpus") for r in rows))
    fabrics = list(dict.fromkeys(str(r.get("fabric", "?")) for r in rows))
    fig, ax = new_figure(7.5, 4.6)
    from matplotlib.lines import Line2D

    markers = "osD^vPX*"
    for i, g in enumerate(groups):
        mine = [r for r in rows if r.get("gpus") == g and _finite(r.get(cost)) and _finite(r.get("scaling_factor"))]
        for j, fabric in enumerate(fabrics):
            pts = [r for r in mine if str(r.get("fabric", "?")) == fabric]
            ax.scatter([r[cost] for r in pts], [r["scaling_factor"] for r in pts], s=22, alpha=0.75,
                       color=f"C{j % 10}", marker=markers[i % len(markers)])
        front = sorted((r for r in mine if r.get("pareto")), key=lambda r: r[cost])
        ax.plot([r[cost] for r in front], [r["scaling_factor"] for r in front], color="0.35", lw=1.0,
                ls=("-", "--", ":", "-.")[i % 4])
    recs = [r for r in results.get("recommendations") or [] if isinstance(r, dict)]
    target = config.get("target") if _finite(config.get("target")) else next(
        (r["target"] for r in recs if _finite(r.get("target"))), None)  # the default target lives in them
    if _finite(target):
        ax.axhline(target, color="grey", ls="--", lw=0.8)
    values = [r.get(cost) for r in rows]
    log_axis(ax, "x", values, "network cost (US dollars)" if cost.endswith("usd") else cost)
    if cost.endswith("usd"):
        dollar_axis(ax, "x")
    ys = [r.get("scaling_factor") for r in rows] + ([target] if _finite(target) else [])
    min_span(ax, ys, 0.1, ceiling=1.01)
    ax.set(ylabel="scaling factor (1 = linear)", title="Plan: scaling factor vs network cost (lines: Pareto frontier)")
    ax.grid(True, which="both", alpha=0.3)
    handles = [Line2D([], [], ls="none", marker="o", color=f"C{j % 10}", label=f) for j, f in enumerate(fabrics)]
    handles += [Line2D([], [], color="0.35", ls=("-", "--", ":", "-.")[i % 4], marker=markers[i % len(markers)],
                       mfc="white", label=f"{g} GPUs" if g is not None else "options") for i, g in enumerate(groups)]
    if _finite(target):
        handles.append(Line2D([], [], color="grey", ls="--", lw=0.8, label=f"target {target:g}"))
    ax.legend(handles=handles, fontsize=7, title="colour: fabric; marker, line: GPUs", title_fontsize=7,
              ncol=2 if len(handles) > 6 else 1)
    alt = (f"Scatter chart: predicted scaling factor against network cost in US dollars for {len(rows)} fabric and "
           f"topology options ({', '.join(fabrics)}, one colour each) at {', '.join(map(str, groups))} GPUs (one "
           f"marker each), the Pareto frontier of each GPU count drawn as a line"
           + (f", the target {target:g} dashed." if _finite(target) else "."))
    front = [r for r in rows if r.get("pareto")] or rows
    columns = [c for c in PLAN_COLUMNS if c in rows[0] and len({str(r.get(c)) for r in rows}) > (c == "model")]
    body = [[num(r.get(c), stored, 4, " %" if c == "network_share" else "") if c != "network_share" or r.get(c) is None
             else num(r[c] * 100, stored, 3, " %") for c in columns] for r in front]
    caption = ("Pareto frontier: no other option is both cheaper and faster (all options: "
               f"<code>fabriclab results show {stored.id}</code>)")
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Predicted by fabriclab: {source(stored)}")
            + "</div>" + out + table([PLAN_HEADERS.get(c, c.replace("_", " ")) for c in columns], body,
                                     caption=caption))


def render_plan(records: list[Stored]) -> str:
    return "".join(safely(_plan_one, s) for s in records)


def _published_one(stored: Stored) -> str:
    rows = result_rows(stored.record["results"])
    sets = [k[:-len("_error")] for k in rows[0] if k.endswith("_error") and k[:-len("_error")] in rows[0]] if rows else []
    if not sets or "published" not in rows[0]:
        return rows_table(stored)
    keys = [str(r.get("key", i)) for i, r in enumerate(rows)]
    kinds = [("points", "error (percentage points)", 5.0), ("relative", "error (% of the published value)", 10.0)]
    panels = [(k, xl, goal, [i for i, r in enumerate(rows) if (r.get("error_kind") == "points") == (k == "points")])
              for k, xl, goal in kinds]
    panels = [p for p in panels if p[3]]
    tallest = max(len(p[3]) for p in panels)
    fig, axes = new_figure(5.2 * len(panels), 1.6 + 0.24 * tallest, ncols=len(panels))
    axes = axes if isinstance(axes, list) else [axes]
    height = 0.8 / len(sets)
    for ax, (kind, xlabel, goal, idx) in zip(axes, panels):
        for j, name in enumerate(sets):
            errors = [rows[i].get(f"{name}_error") for i in idx]
            ys = [n - 0.4 + height * (j + 0.5) for n in range(len(idx))]
            ax.barh(ys, [e if _finite(e) else 0.0 for e in errors], height=height, color=series_style(j)["color"],
                    label=MODEL_SETS.get(name, name))
        ax.axvspan(-goal, goal, color="green", alpha=0.08, label=f"goal: within {goal:g}"
                   + (" points" if kind == "points" else " %"))
        ax.set_yticks(range(len(idx)), [keys[i] for i in idx], fontsize=7)
        ax.set_ylim(len(idx) - 0.5, -0.5)
        ax.set(xlabel=xlabel, title=("fractions and percentages" if kind == "points" else "ratios and times"))
        ax.title.set_fontsize(9)
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Published numbers: fabriclab's error per number (no bar: not predicted)", fontsize=10)
    alt = (f"Horizontal bar charts: for each of {len(rows)} numbers the papers publish, the error of fabriclab's "
           f"prediction by {' and '.join(MODEL_SETS.get(s, s) for s in sets)}: fractions and percentages in "
           f"percentage points, ratios and times in percent, each with its goal band shaded.")
    head = ["row", "paper", "where", "quantity", "published"]
    for name in sets:
        head += [MODEL_SETS.get(name, name), "error"]
    body = []
    for key, r in zip(keys, rows):
        unit = r.get("unit", "")
        cells = [esc(key), esc(r.get("paper", "")), esc(r.get("where", "")), esc(r.get("quantity", "")),
                 num(r["published"], stored, 4, UNIT_SUFFIX.get(unit, ""))]
        for name in sets:
            err, ok = r.get(f"{name}_error"), r.get(f"{name}_within_goal")
            mark = "pt" if r.get("error_kind") == "points" else "%"
            cls = "ok" if ok else "bad"
            cells += [num(r.get(name), stored, 4, UNIT_SUFFIX.get(unit, "")),
                      f'<a class="n {cls}" href="#rec-{stored.id}">{err:+.1f} {mark}</a>' if _finite(err) else "-"]
        body.append(cells)
    counts = "; ".join(_count(rows, n, stored) for n in sets)
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Compared by fabriclab: {source(stored)}")
            + "</div>" + f"<p>{counts} (5 points for fractions and percentages, 10 % for ratios and times).</p>"
            + table(head, body))


def _count(rows: list[dict], name: str, stored: Stored) -> str:
    """`baseline model: 0 of 21 within the goal, 14 not predicted`, as the command says it."""
    predicted = [r for r in rows if _finite(r.get(f"{name}_error"))]
    within = sum(bool(r.get(f"{name}_within_goal")) for r in predicted)
    return (f"{MODEL_SETS.get(name, name)}: {num(within, stored)} of {num(len(predicted), stored)} within the goal, "
            f"{num(len(rows) - len(predicted), stored)} not predicted")


def render_published(records: list[Stored]) -> str:
    return "".join(safely(_published_one, s) for s in records)


SECTIONS = (
    Section(key="plan", title="Plan: how much network to buy", kinds=("plan",),
            fill="fabriclab plan --model resnet50 --gpus 64,256,512",
            intro="The architect's question: which fabric and which bisection reach the target scaling at the "
                  "lowest network cost? Each option's scaling factor (flow simulation on the actual topology, the "
                  "what-if's iteration model) against its network cost; the prices are those of the record.",
            render=render_plan, keep=2),
    Section(key="published", title="Published measurements", kinds=("validate.published",),
            fill="fabriclab validate published",
            intro="The papers' own numbers (Samsi et al.; Zhang, Li, Tanimura, Nakada; Awan et al.; Zhang et "
                  "al.; Horovod's documentation) beside fabriclab's prediction of the same quantity, with the "
                  "error.",
            render=render_published, keep=1),
)
