"""Report section: the LLM plan (`fabriclab plan --model llama3-70b`), which cluster and layout to buy.

Records of kind `plan.llm`: the plan's answer (one recommendation per GPU count), every option's best
configuration as tokens/s against the cluster's cost with the Pareto frontier of each GPU count (a figure,
`plan_figure`: options at one point spread around it and labelled, tick labels distinct), the chosen layout
of each option with the runner-up where the plan names one (a table), and what the network costs per
option: its dollars and share of the cluster, and the seconds of the step it leaves exposed per
communicator (TP, CP, EP, PP, DP) and the pipeline bubble. Per-option exposed fields (`exposed_s`) are
read where the plan writes them, else its split of the step (`split_s`). The newest plan of each distinct request is drawn in full, older
distinct ones by their answer and tables.

Try it: `fabriclab plan --model llama3-70b --gpus 1024,4096 --nic-rates 400Gbps,800Gbps && fabriclab report`.
"""

from __future__ import annotations

import math

from fabriclab.report.html.goodput import goodput_figure, plan_points
from fabriclab.report.html.parts import (Section, config_key, distinct_ticks, dollar_axis, esc, figure, log_axis,
                                         new_figure, num, safely, source, table)
from fabriclab.report.store_views import Stored

KIND = "plan.llm"
# The step's parts the network leaves exposed, in the order of the split.
EXPOSED = ("tp", "cp", "ep", "pp", "dp", "bubble")
LABELS = {"tp": "TP", "cp": "CP", "ep": "EP", "pp": "PP", "dp": "DP", "bubble": "bubble"}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def exposed(row: dict) -> dict[str, float | None]:
    """Seconds of the step each communicator (and the bubble) leaves exposed for one option's best
    configuration: the plan's `exposed_s` (or `exposed_<part>_s`) where written, else its `split_s`."""
    given = row.get("exposed_s") if isinstance(row.get("exposed_s"), dict) else {}
    split = row.get("split_s") if isinstance(row.get("split_s"), dict) else {}
    out = {}
    for part in EXPOSED:
        value = next((v for v in (given.get(part), row.get(f"exposed_{part}_s"), split.get(part)) if _finite(v)), None)
        out[part] = value
    return out


def answers(stored: Stored) -> list[str]:
    """The plan's recommendations, one per GPU count, as its command printed them."""
    recs = stored.record.get("results", {}).get("recommendations") or []
    return [r if isinstance(r, str) else r.get("text", "") for r in recs if isinstance(r, (str, dict))]


# Markers closer than this on the figure (pixels) would hide each other: they are spread on a small ring.
OVERLAP_PX = 8.0
SPREAD_PT = 4.5


def plan_figure(rows: list[dict], model: str):
    """The figure of the plan's rows: tokens/s against cluster cost, colour per option, marker per GPU count,
    the Pareto frontier of each GPU count as a line. Options at (nearly) the same point are spread on a small
    ring around it and labelled `N options: #a, #b` (their rows in the tables), so none hides another; tick
    labels are distinct (`distinct_ticks`). Returns the matplotlib Figure."""
    from matplotlib.lines import Line2D

    fig, ax = new_figure(7.2, 4.4)
    options = list(dict.fromkeys(r["option"] for r in rows))
    groups = list(dict.fromkeys(r["gpus"] for r in rows))
    markers = "osD^vPX*"
    xs, ys = [r["cluster_usd"] for r in rows], [r["tokens_per_s"] for r in rows]
    log_axis(ax, "x", xs, "cluster cost (US dollars)")
    log_axis(ax, "y", ys, "tokens/s (training throughput)")
    ax.plot(xs, ys, ls="none")  # the limits, before the markers are spread in display space
    ax.margins(0.08)
    ax.autoscale_view()
    limits = ax.get_xlim(), ax.get_ylim()
    for at, members in _overlaps(ax, rows).items():
        for k, n in enumerate(members):
            r = rows[n]
            i, j = groups.index(r["gpus"]), options.index(r["option"])
            ax.scatter([r["cluster_usd"]], [r["tokens_per_s"]], s=30, alpha=0.8, color=f"C{j % 10}",
                       marker=markers[i % len(markers)], transform=_spread(fig, ax, k, len(members)))
        if len(members) > 1:
            ax.annotate(f"{len(members)} options: " + ", ".join(f"#{n + 1}" for n in members),
                        (rows[members[0]]["cluster_usd"], rows[members[0]]["tokens_per_s"]), xytext=(7, 7),
                        textcoords="offset points", fontsize=6, color="0.25")
    for i, g in enumerate(groups):
        front = sorted((r for r in rows if r["gpus"] == g and r.get("pareto")), key=lambda r: r["cluster_usd"])
        ax.plot([r["cluster_usd"] for r in front], [r["tokens_per_s"] for r in front], color="0.35", lw=1.0,
                ls=("-", "--", ":", "-.")[i % 4])
    ax.set_xlim(*limits[0])
    ax.set_ylim(*limits[1])
    dollar_axis(ax, "x")
    if ax.get_yscale() == "linear":  # 1.03M, not 1.03 under a 1e6 offset; as many digits as keep ticks apart
        ax.yaxis.set_major_formatter(distinct_ticks(
            lambda y, d: f"{y / 1e6:.{d + 1}g}M" if y >= 1e6 else f"{y:,.0f}"))
    ax.set(title=f"LLM plan, {model}: throughput vs cost (lines: Pareto frontier per GPU count)")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    handles = [Line2D([], [], ls="none", marker="o", color=f"C{j % 10}", label=o) for j, o in enumerate(options)]
    handles += [Line2D([], [], color="0.35", ls=("-", "--", ":", "-.")[i % 4], marker=markers[i % len(markers)],
                       mfc="white", label=f"{g:,} GPUs") for i, g in enumerate(groups)]
    ax.legend(handles=handles, fontsize=7, title="colour: option; marker, line: GPUs", title_fontsize=7,
              ncol=2 if len(handles) > 6 else 1)
    return fig


def _overlaps(ax, rows: list[dict]) -> dict[int, list[int]]:
    """Rows whose markers fall within OVERLAP_PX of one another, grouped (first row of a group -> its rows)."""
    points = ax.transData.transform([(r["cluster_usd"], r["tokens_per_s"]) for r in rows])
    groups: dict[int, list[int]] = {}
    for n, (x, y) in enumerate(points):
        near = next((g for g in groups if abs(points[g][0] - x) < OVERLAP_PX and abs(points[g][1] - y) < OVERLAP_PX),
                    None)
        groups.setdefault(n if near is None else near, []).append(n)
    return groups


def _spread(fig, ax, k: int, n: int):
    """The data transform moved to the k-th of n places on a ring of SPREAD_PT points (none for one)."""
    from matplotlib.transforms import offset_copy

    if n == 1:
        return ax.transData
    angle = 2 * math.pi * k / n
    return offset_copy(ax.transData, fig=fig, x=SPREAD_PT * math.cos(angle), y=SPREAD_PT * math.sin(angle),
                       units="points")


def _figure(rows: list[dict], stored: Stored, model: str) -> str:
    fig = plan_figure(rows, model)
    options = list(dict.fromkeys(r["option"] for r in rows))
    groups = list(dict.fromkeys(r["gpus"] for r in rows))
    alt = (f"Scatter chart: training throughput in tokens/s against cluster cost in US dollars for {len(options)} "
           f"options ({', '.join(options)}) at {', '.join(f'{g:,}' for g in groups)} GPUs, the Pareto frontier of "
           f"each GPU count drawn as a line; options at the same point are spread around it and labelled.")
    return figure(fig, alt=alt, caption=f"Planned by fabriclab: {source(stored)}")


def _tables(rows: list[dict], stored: Stored, fold: bool) -> str:
    runners = any(r.get("runner_up") for r in rows)  # the plan writes the second-best layout where it has one
    layout = [[num(i, stored), esc(r["option"]), num(r["gpus"], stored), esc(r.get("parallel", "")),
               num(r["tokens_per_s"], stored), num(100 * r["mfu"], stored, 3, " %"), num(r["step_time_s"], stored),
               num(r.get("memory_per_gpu_bytes", 0) / 1e9, stored, 3), num(r["cluster_usd"] / 1e6, stored, 4),
               num(r.get("usd_per_token_per_s"), stored), "P" if r.get("pareto") else "-"]
              + ([_runner_up(r, stored)] if runners else []) for i, r in enumerate(rows, 1)]
    net = []
    for i, r in enumerate(rows, 1):
        parts = exposed(r)
        total = sum(v for v in parts.values() if v is not None)
        step = r.get("step_time_s")
        net.append([num(i, stored), esc(r["option"]), num(r["gpus"], stored),
                    num(r.get("network_usd", 0) / 1e6, stored, 4),
                    num(100 * r["network_share"], stored, 3, " %") if _finite(r.get("network_share")) else "-",
                    *(num(parts[p], stored) if parts[p] is not None else "-" for p in EXPOSED),
                    num(100 * total / step, stored, 3, " %") if _finite(step) and step else "-"])
    return (table(["#", "option", "GPUs", "layout", "tokens/s", "MFU", "step (s)", "GB/GPU", "cluster $M",
                   "$ per token/s", "Pareto", *(["runner-up (its step longer by)"] if runners else [])], layout,
                  fold=fold,
                  caption="each option's best configuration: the chosen layout (P: on the Pareto frontier)")
            + table(["#", "option", "GPUs", "network $M", "of cluster", *(f"{LABELS[p]} s" for p in EXPOSED),
                     "of step"], net, fold=fold,
                    caption="what the network costs per option: dollars, and seconds of the step exposed per "
                            "communicator and in the pipeline bubble"))


def _runner_up(row: dict, stored: Stored) -> str:
    if not row.get("runner_up") or not _finite(row.get("runner_up_slower")):
        return "-"
    return f"{esc(row['runner_up'])} (+{num(100 * row['runner_up_slower'], stored, 3, ' %')})"


def _one(stored: Stored, full: bool) -> str:
    results = stored.record["results"]
    rows = [r for r in results["rows"] if _finite(r.get("tokens_per_s")) and _finite(r.get("cluster_usd"))]
    model = results.get("stats", {}).get("model") or (stored.record.get("config") or {}).get("model", "?")
    head = "".join(f'<p class="answer">{esc(t)} (<a href="#rec-{stored.id}">record {stored.id}</a>)</p>'
                   for t in answers(stored))
    unfit = results.get("unfit") or []
    notes = (f'<p class="note">{len(unfit)} option(s) fit no configuration in memory (<code>fabriclab results '
             f"show {stored.id}</code> names them).</p>" if unfit else "")
    stats = results.get("stats") or {}
    searched = (f"<p>{num(stats.get('num_enumerated'), stored)} configurations on "
                f"{num(stats.get('num_options'), stored)} options, {num(stats.get('num_fit'), stored)} fit in memory, "
                f"{num(stats.get('num_simulated'), stored)} simulated; {source(stored)}.</p>") if stats else ""
    if not rows:
        return head + notes + searched
    if not full:
        return head + notes + searched + _tables(rows, stored, fold=True)
    good = goodput_figure(plan_points(rows, model), f"goodput against GPU count: {source(stored)}")
    return (head + '<div class="pair">' + _figure(rows, stored, model) + good + "</div>" + notes + searched
            + _tables(rows, stored, fold=None))


def render(records: list[Stored]) -> str:
    """The newest plan in full; older distinct plans by their answer and folded tables."""
    return "".join(safely(lambda s, full=(i == 0): _one(s, full), s) for i, s in enumerate(records))


SECTIONS = (
    Section(key="llm-plan", title="LLM plan: which cluster and layout to buy", kinds=(KIND,),
            fill="fabriclab plan --model llama3-70b --gpus 1024,4096 --nic-rates 400Gbps,800Gbps",
            intro="For a transformer and a GPU count: every cluster option's best parallel layout (TP, PP, CP, "
                  "EP, DP, ZeRO), simulated step by step, its tokens/s against what the cluster costs, and "
                  "what the network costs per option in dollars and in exposed seconds of the step.",
            render=render, keep=6, distinct=config_key),
)
