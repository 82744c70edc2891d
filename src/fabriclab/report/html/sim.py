"""Report sections for the simulated studies: fat-tree fatness curves and the what-if scaling factor.

Fatness (`simulate.sweep`, the study of Zhang, Li, Tanimura, Nakada, "How Much Should We Invest for
Network Facility"): time to all-reduce 1 GB against the fat tree's bisection ratio, one line per method.
What-if (`whatif`, `whatif.reproduce`, Zhang et al., "Is Network the Bottleneck of Distributed
Training?"): scaling factor against bandwidth and against compression.

Try it: `fabriclab simulate sweep --preset fatness --hosts 128 && fabriclab report --out report/`.
"""

from __future__ import annotations

from fractions import Fraction

from fabriclab.report.html.parts import (Section, esc, figure, log_axis, new_figure, num, safely, series_style,
                                         source, table)
from fabriclab.report.store_views import Stored

# The poster's figures (levels, hosts, link GB/s, latency us), drawn first when the sweep has them.
POSTER_CONFIGS = ((2, 2048, 4.0, 0.2), (3, 1024, 4.0, 0.2), (3, 1024, 1.0, 0.2))
MAX_FIGURES = 3
# Names the what-if rows give Zhang et al.'s closed-form cost (the option value, old and new).
CLOSED_FORM_NAMES = ("ring-addest", "paper004", "zhang", "bottleneck")


def _fatness_rows(stored: Stored) -> list[dict]:
    """Rows of a fatness sweep with numbers as numbers (its CSV keeps them as text)."""
    rows = stored.record["results"]
    rows = rows["rows"] if isinstance(rows, dict) else rows
    return [{"layers": int(r["layers"]), "hosts": int(r["hosts"]), "bisection": str(r["bisection"]),
             "link_GBps": float(r["link_GBps"]), "latency_us": float(r["latency_us"]), "method": r["method"],
             "time_s": float(r["time_s"])} for r in rows]


def _fatness_one(stored: Stored) -> str:
    rows = _fatness_rows(stored)
    configs = sorted({(r["layers"], r["hosts"], r["link_GBps"], r["latency_us"]) for r in rows})
    chosen = [c for c in POSTER_CONFIGS if c in configs] or configs
    parts = []
    for layers, hosts, link, lat in chosen[:MAX_FIGURES]:
        mine = [r for r in rows if (r["layers"], r["hosts"], r["link_GBps"], r["latency_us"]) == (layers, hosts,
                                                                                                    link, lat)]
        ratios = sorted({r["bisection"] for r in mine}, key=lambda b: -Fraction(b))
        methods = list(dict.fromkeys(r["method"] for r in mine))
        t = {(r["bisection"], r["method"]): r["time_s"] for r in mine}
        fig, ax = new_figure()
        for i, m in enumerate(methods):
            xs = [float(Fraction(b)) for b in ratios if (b, m) in t]
            ax.plot(xs, [t[(b, m)] for b in ratios if (b, m) in t], label=m, **series_style(i))
        ax.set_xscale("log", base=2)
        ax.set_xticks([float(Fraction(b)) for b in ratios], ratios)
        ax.minorticks_off()
        ax.invert_xaxis()
        log_axis(ax, "y", [r["time_s"] for r in mine], "time to all-reduce 1 GB (s)")
        what = f"{layers}-level fat tree, {hosts} hosts, {link:g} GB/s links, {lat:g} us per link"
        ax.set(title=f"All-reduce of 1 GB: {what}", xlabel="bisection ratio (1 = full bisection)")
        ax.title.set_fontsize(9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        alt = (f"Line chart: simulated time to all-reduce 1 GB in seconds against the bisection ratio from "
               f"{ratios[0]} to {ratios[-1]} on a {what}, one line per method ({', '.join(methods)}).")
        head = ["method"] + ratios + ([f"{ratios[-1]} vs {ratios[0]}"] if len(ratios) > 1 else [])
        body = []
        for m in methods:
            cells = [num(t.get((b, m)), stored) for b in ratios]
            if len(ratios) > 1 and (ratios[0], m) in t and (ratios[-1], m) in t:
                cells.append(num(t[(ratios[-1], m)] / t[(ratios[0], m)], stored, 3, "x"))
            body.append([esc(m)] + cells)
        parts.append('<div class="pair">' + figure(fig, alt=alt, caption=f"Simulated by fabriclab: {source(stored)}")
                     + table(head, body, caption=f"Seconds per 1 GB all-reduce, {esc(what)}") + "</div>")
    others = len(configs) - min(len(chosen), MAX_FIGURES)
    if others > 0:
        parts.append(f"<p>{others} more tree / link configurations are in this record: "
                     f"<code>fabriclab results export --ids {stored.id} --format csv</code>.</p>")
    return "".join(parts)


def render_fatness(records: list[Stored]) -> str:
    return "".join(safely(_fatness_one, s) for s in records)


def _whatif_rows(stored: Stored) -> list[dict]:
    results = stored.record["results"]
    return results["rows"] if isinstance(results, dict) else results


def _whatif_one(stored: Stored) -> str:
    rows = _whatif_rows(stored)
    algo = rows[0]["algo"]
    rows = [r for r in rows if r["algo"] == algo]
    models = list(dict.fromkeys(r["model"] for r in rows))
    workers = sorted({r["workers"] for r in rows})
    bws = sorted({r["bandwidth_Gbps"] for r in rows})
    comps = sorted({r["compression"] for r in rows})
    f = {(r["model"], r["workers"], r["bandwidth_Gbps"], r["compression"]): r["scaling_factor"] for r in rows}
    cost = rows[0].get("cost", "")
    closed = cost in CLOSED_FORM_NAMES
    label = ("Zhang et al.'s closed form 2S(N-1)/N/bw + (N-1) AddEst(S/N)" if closed else
             f"cost model {cost}, algorithm {algo}")
    n = workers[-1]
    parts = []
    fig, ax = new_figure()
    for i, m in enumerate(models):
        style = series_style(i)
        for j, w in enumerate(workers):
            ys = [f.get((m, w, b, 1.0)) for b in bws]
            if any(y is not None for y in ys):
                ax.plot(bws, [y if y is not None else float("nan") for y in ys], color=style["color"],
                        marker=style["marker"], ls=("-", "--", ":", "-.")[j % 4], label=f"{m}, {w} workers")
    ax.set_xscale("log")
    ax.set_xticks(bws, [f"{b:g}" for b in bws])
    ax.minorticks_off()
    ax.set(ylim=(0, 1.05), xlabel="network bandwidth per worker (Gbit/s, log scale)",
           ylabel="scaling factor (1 = linear)", title="What-if: scaling factor vs bandwidth, no compression")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    alt = (f"Line chart: predicted scaling factor (0 to 1) against bandwidth from {bws[0]:g} to {bws[-1]:g} "
           f"Gbit/s for {', '.join(models)} at {', '.join(map(str, workers))} workers, without compression.")
    head = ["model", "Gbit/s"] + [f"{w} workers" for w in workers]
    body = [[esc(m), num(b, stored)] + [num(f.get((m, w, b, 1.0)), stored) for w in workers]
            for m in models for b in bws]
    parts.append('<div class="pair">' + figure(fig, alt=alt, caption=f"Predicted by fabriclab ({esc(label)}): "
                                                                     f"{source(stored)}")
                 + table(head, body, caption="Scaling factor, no compression") + "</div>")
    if len(comps) > 1:
        fig, ax = new_figure()
        for i, m in enumerate(models):
            for j, b in enumerate(bws):
                ys = [f.get((m, n, b, c)) for c in comps]
                ax.plot(comps, [y if y is not None else float("nan") for y in ys], color=series_style(i)["color"],
                        marker=series_style(i)["marker"], ls=("-", "--", ":", "-.", (0, (1, 3)))[j % 5],
                        label=f"{m}, {b:g} Gbit/s")
        ax.set_xscale("log")
        ax.set_xticks(comps, [f"{c:g}" for c in comps])
        ax.minorticks_off()
        ax.set(ylim=(0, 1.05), xlabel="gradient compression ratio (log scale)",
               ylabel="scaling factor (1 = linear)", title=f"What-if: scaling factor vs compression, {n} workers")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
        alt = (f"Line chart: predicted scaling factor against the compression ratio from {comps[0]:g} to "
               f"{comps[-1]:g} at {n} workers, one line per model and bandwidth.")
        head = ["model", "Gbit/s"] + [f"{c:g}x" for c in comps]
        body = [[esc(m), num(b, stored)] + [num(f.get((m, n, b, c)), stored) for c in comps]
                for m in models for b in bws]
        parts.append('<div class="pair">' + figure(fig, alt=alt, caption=f"Predicted by fabriclab: {source(stored)}")
                     + table(head, body, caption=f"Scaling factor at {n} workers by compression ratio") + "</div>")
    return "".join(parts)


def render_whatif(records: list[Stored]) -> str:
    return "".join(safely(_whatif_one, s) for s in records)


SECTIONS = (
    Section(key="fatness", title="Fat-tree fatness: all-reduce time vs bisection ratio", kinds=("simulate.sweep",),
            fill="fabriclab simulate sweep --preset fatness",
            intro="How thin may the fat tree be? The study of Zhang, Li, Tanimura and Nakada (&ldquo;How Much "
                  "Should We Invest for Network Facility&rdquo;) all-reduces 1 GB of gradients on 2- and 3-level "
                  "fat trees at bisection ratios 1 to 1/16. Here: fabriclab's flow-level simulation of the same "
                  "grid (one rank per host, D-mod-K routing, max-min fair sharing).",
            render=render_fatness, keep=1),
    Section(key="whatif", title="What-if: scaling vs bandwidth and compression", kinds=("whatif", "whatif.reproduce"),
            fill="fabriclab whatif reproduce",
            intro="Is the network the bottleneck? Zhang et al. (&ldquo;Is Network the Bottleneck of Distributed "
                  "Training?&rdquo;, NetAI'20) replay measured V100 gradient-ready times against an all-reduce "
                  "cost and report the scaling factor t_batch / (t_batch + t_overhead). Here: fabriclab's "
                  "what-if on the same profiles.",
            render=render_whatif, keep=2),
)
