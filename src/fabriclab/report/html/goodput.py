"""Report figure: goodput against GPU count, beside the failure-free step's tokens/s.

`whatif llm` records (their `goodput_tokens_per_s`, `effective_training_time`) and the rows of `plan
--rank goodput` carry goodput (`docs/goodput.md`). `goodput_points` reads either; `goodput_figure` draws,
per model and cluster (or plan option), the step's tokens/s (hollow) and the goodput (filled) against the
job's GPUs, joined in GPU order, so the share failures take is the gap between them and grows with size.
Sections draw it only where some record carries goodput.

Try it: `fabriclab whatif llm --model llama3-8b --gpus 64 && fabriclab whatif llm --model llama3-8b --gpus 1024
&& fabriclab report --out report/`.
"""

from __future__ import annotations

import math

from fabriclab.report.html.parts import figure, log_axis, new_figure


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def goodput_points(records) -> list[dict]:
    """One point per `whatif.llm` record with goodput: label (model on cluster), GPUs, both throughputs."""
    points = []
    for stored in records:
        r = stored.record.get("results") or {}
        if _finite(r.get("goodput_tokens_per_s")) and _finite(r.get("tokens_per_s")) and r.get("num_gpus"):
            points.append({"label": f"{r.get('model')} on {r.get('cluster')}", "gpus": r["num_gpus"],
                           "tokens_per_s": r["tokens_per_s"], "goodput_tokens_per_s": r["goodput_tokens_per_s"],
                           "effective_training_time": r.get("effective_training_time"), "id": stored.id})
    return points


def plan_points(rows: list[dict], model: str) -> list[dict]:
    """One point per plan row with goodput (`plan --rank goodput`), labelled by its option."""
    return [{"label": f"{model}, {r['option']}", "gpus": r["gpus"], "tokens_per_s": r["tokens_per_s"],
             "goodput_tokens_per_s": r["goodput_tokens_per_s"],
             "effective_training_time": r.get("effective_training_time")}
            for r in rows if _finite(r.get("goodput_tokens_per_s")) and _finite(r.get("tokens_per_s"))]


def goodput_figure(points: list[dict], caption: str) -> str:
    """The figure of `points` (module doc); empty when there are none."""
    if not points:
        return ""
    fig, ax = new_figure(6.4, 3.8)
    labels = list(dict.fromkeys(p["label"] for p in points))
    for i, label in enumerate(labels):
        mine = sorted((p for p in points if p["label"] == label), key=lambda p: p["gpus"])
        xs = [p["gpus"] for p in mine]
        ax.plot(xs, [p["tokens_per_s"] for p in mine], color=f"C{i % 10}", ls="--", marker="o", mfc="white", lw=1,
                label=f"{label}: step")
        ax.plot(xs, [p["goodput_tokens_per_s"] for p in mine], color=f"C{i % 10}", marker="o", lw=1.4,
                label=f"{label}: goodput")
    log_axis(ax, "x", [p["gpus"] for p in points], "GPUs of the job")
    log_axis(ax, "y", [v for p in points for v in (p["tokens_per_s"], p["goodput_tokens_per_s"])], "tokens/s")
    if ax.get_yscale() == "linear":  # 2.4M, not 2.4 under a 1e6 offset
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y / 1e6:.4g}M" if y >= 1e6 else f"{y:,.0f}"))
    ax.set_title("goodput (filled) and the failure-free step (hollow) against GPU count", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="best")
    alt = ("Line chart of tokens/s against GPUs: " + "; ".join(
        f"{p['label']} at {p['gpus']:,} GPUs, step {p['tokens_per_s']:,.0f}, goodput {p['goodput_tokens_per_s']:,.0f}"
        for p in points[:12]))
    return figure(fig, alt=alt, caption=caption)


def goodput_block(records) -> str:
    """The figure of the `whatif.llm` records that carry goodput, in a row of its own; empty without any."""
    from fabriclab.report.html.parts import anchor

    points = goodput_points(records)
    if not points:
        return ""
    shown = [s for s in records if any(p["id"] == s.id for p in points)]
    caption = "goodput against GPU count: " + "; ".join(f'<a href="#{anchor(s)}">record {s.id}</a>' for s in shown)
    return '<div class="pair">' + goodput_figure(points, caption) + "</div>"
