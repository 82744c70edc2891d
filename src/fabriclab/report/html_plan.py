"""Report sections: `plan` (how much network to buy) and the papers' published numbers beside fabriclab's.

Plan (`plan`): every fabric / topology option's scaling factor against its network cost, the Pareto
frontier, the target, and the one-line recommendation per GPU count. Published (`validate.published`):
each number the papers give (Samsi et al.; Zhang, Li, Tanimura, Nakada; Awan et al.; Zhang et al.;
Horovod's documentation) beside fabriclab's prediction of it by each model set, with the error.

Try it: `fabriclab plan --gpus 64,256,512 && fabriclab validate published && fabriclab report --out report/`.
"""

from __future__ import annotations

import math

from fabriclab.report.html_parts import (Section, esc, figure, log_axis, new_figure, num, rows_table, safely,
                                         series_style, source, table)
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
    fig, ax = new_figure(7.5, 4.6)
    for i, g in enumerate(groups):
        mine = [r for r in rows if r.get("gpus") == g and _finite(r.get(cost)) and _finite(r.get("scaling_factor"))]
        style = series_style(i)
        ax.scatter([r[cost] for r in mine], [r["scaling_factor"] for r in mine], s=16, alpha=0.55,
                   color=style["color"], marker=style["marker"], label=f"{g} GPUs" if g is not None else "options")
        front = sorted((r for r in mine if r.get("pareto")), key=lambda r: r[cost])
        ax.plot([r[cost] for r in front], [r["scaling_factor"] for r in front], color=style["color"], lw=1.2)
    target = config.get("target")
    if _finite(target):
        ax.axhline(target, color="grey", ls="--", lw=0.8, label=f"target {target:g}")
    log_axis(ax, "x", [r.get(cost) for r in rows], "network cost (US dollars)" if cost.endswith("usd") else cost)
    ax.set(ylabel="scaling factor (1 = linear)", title="Plan: scaling factor vs network cost (lines: Pareto frontier)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    alt = (f"Scatter chart: predicted scaling factor against network cost in US dollars for {len(rows)} fabric and "
           f"topology options at {', '.join(map(str, groups))} GPUs, the Pareto frontier of each GPU count drawn "
           f"as a line" + (f", the target {target:g} dashed." if _finite(target) else "."))
    front = [r for r in rows if r.get("pareto")] or rows
    columns = [c for c in PLAN_COLUMNS if c in rows[0] and len({str(r.get(c)) for r in rows}) > (c == "model")]
    body = [[num(r.get(c), stored, 4, " %" if c == "network_share" else "") if c != "network_share" or r.get(c) is None
             else num(r[c] * 100, stored, 3, " %") for c in columns] for r in front]
    caption = ("Pareto frontier: no other option is both cheaper and faster (all options: "
               f"<code>fabriclab results show {stored.id}</code>)")
    return out + ('<div class="pair">' + figure(fig, alt=alt, caption=f"Predicted by fabriclab: {source(stored)}")
                  + table([PLAN_HEADERS.get(c, c.replace("_", " ")) for c in columns], body, caption=caption)
                  + "</div>")


def render_plan(records: list[Stored]) -> str:
    return "".join(safely(_plan_one, s) for s in records)


def _published_one(stored: Stored) -> str:
    rows = result_rows(stored.record["results"])
    sets = [k[:-len("_error")] for k in rows[0] if k.endswith("_error") and k[:-len("_error")] in rows[0]] if rows else []
    if not sets or "published" not in rows[0]:
        return rows_table(stored)
    keys = [str(r.get("key", i)) for i, r in enumerate(rows)]
    fig, ax = new_figure(7.5, 1.4 + 0.3 * len(rows))
    height = 0.8 / len(sets)
    for j, name in enumerate(sets):
        errors = [r.get(f"{name}_error") for r in rows]
        ys = [i - 0.4 + height * (j + 0.5) for i in range(len(rows))]
        ax.barh(ys, [e if _finite(e) else 0.0 for e in errors], height=height, color=series_style(j)["color"],
                label=MODEL_SETS.get(name, name))
    ax.axvspan(-5, 5, color="green", alpha=0.08, label="goal: 5 points")
    for x in (-10, 10):
        ax.axvline(x, color="green", ls=":", lw=0.8)
    ax.set_yticks(range(len(rows)), keys, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="error of fabriclab (percentage points; relative % for ratios; dotted: 10 %)",
           title="Published numbers: fabriclab's error per number")
    ax.title.set_fontsize(10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7)
    alt = (f"Horizontal bar chart: for each of {len(rows)} numbers the papers publish, the error of fabriclab's "
           f"prediction by {' and '.join(MODEL_SETS.get(s, s) for s in sets)}, with the goal band shaded.")
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
    counts = "; ".join(f"{MODEL_SETS.get(n, n)}: {num(sum(bool(r.get(f'{n}_within_goal')) for r in rows), stored)} of "
                       f"{num(len(rows), stored)} within the goal" for n in sets)
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Compared by fabriclab: {source(stored)}")
            + "</div>" + f"<p>{counts} (5 points for fractions and percentages, 10 % for ratios).</p>"
            + table(head, body))


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
