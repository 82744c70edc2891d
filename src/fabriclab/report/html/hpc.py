"""Report sections: the stencil's compute / communication split, and simulator vs measured.

Stencil (`stencil.run`, `stencil.scale`, `stencil.simulate`): Samsi et al.'s Figure 3 (CartDG: compute and
communication time per step against cores). Validation (`validate`, `validate.*`): each collective's
time measured in the emulated cluster beside the simulator's, with the error.

Try it: `fabriclab stencil simulate --ranks 64,256,1024 && fabriclab report --out report/`.
"""

from __future__ import annotations

from fabriclab.report.html.parts import (Section, error_pct, esc, figure, log_axis, new_figure, num, pct, rows_table,
                                         safely, series_style, source, sources, table, time_axis)
from fabriclab.report.store_views import Stored, result_rows
from fabriclab.report.html.train import FABRIC_LABELS

_NAN = float("nan")



def _v(x):
    """A plottable number: None becomes NaN (a gap in the line)."""
    return _NAN if x is None else x


def _rows(stored: Stored) -> list[dict]:
    results = stored.record["results"]
    return results["rows"] if isinstance(results, dict) and "rows" in results else results


def _stencil_one(stored: Stored) -> str:
    rows = _rows(stored)
    measured = stored.kind == "stencil.scale"
    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    first = sorted((r for r in rows if r["fabric"] == fabrics[0]), key=lambda r: r["num_ranks"])
    fig, ax = new_figure(7.5, 4.4)
    k = time_axis(ax, "y", [v for r in rows for v in (r["compute_s"], r["comm_s"], r.get("sim_comm_s"))],
                  "time per step")
    ax.plot([r["num_ranks"] for r in first], [r["compute_s"] * k for r in first], color="black", marker="o",
            label="compute")
    for i, fabric in enumerate(fabrics):
        mine = sorted((r for r in rows if r["fabric"] == fabric and r["num_ranks"] > 1), key=lambda r: r["num_ranks"])
        name, style = FABRIC_LABELS.get(fabric, fabric), series_style(i + 1)
        ax.plot([r["num_ranks"] for r in mine], [r["comm_s"] * k for r in mine], ls="-",
                label=f"communication, {name}" + (" (measured)" if measured else " (simulated)"), **style)
        if measured:
            ax.plot([r["num_ranks"] for r in mine], [_v(r.get("sim_comm_s")) * k for r in mine], ls=":", marker="x",
                    color=style["color"], label=f"communication, {name} (simulated)")
    ranks = sorted({r["num_ranks"] for r in rows})
    ax.set_xscale("log")
    ax.set_xticks(ranks, [str(n) for n in ranks])
    ax.minorticks_off()
    log_axis(ax, "y", [v * k for r in rows for v in (r["compute_s"], r["comm_s"], r.get("sim_comm_s"))
                       if v is not None], ax.get_ylabel())
    ax.set(xlabel="ranks (cores, log scale)",
           title="Stencil: compute vs communication per step" + (" (emulated cluster)" if measured else
                                                                 " (flow simulation)"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    alt = (f"Log-log line chart: compute time and communication time per step of the stencil mini-app against "
           f"the number of ranks, one communication line per fabric ({', '.join(fabrics)})"
           + ("; measured in the emulated cluster (solid) and simulated (dotted)." if measured else "; simulated."))
    head = ["fabric", "ranks", "compute ms", "comm ms", "comm share"] + (["simulated comm ms", "error"] if measured
                                                                          else ["step ms", "efficiency"])
    body = []
    for r in rows:
        share = r["comm_s"] / (r["comm_s"] + r["compute_s"]) if r["comm_s"] + r["compute_s"] else None
        cells = [esc(FABRIC_LABELS.get(r["fabric"], r["fabric"])), num(r["num_ranks"], stored),
                 num(r["compute_s"] * 1e3, stored), num(r["comm_s"] * 1e3, stored),
                 num(None if share is None else share * 100, stored, 3, " %")]
        if measured:
            sim = r.get("sim_comm_s")
            cells += [num(None if sim is None else sim * 1e3, stored),
                      pct(error_pct(sim, r["comm_s"]) if r["num_ranks"] > 1 else None, stored)]
        else:
            cells += [num(r["step_s"] * 1e3, stored), num(r["efficiency"] * 100, stored, 3, " %")]
        body.append(cells)
    caption = "error = (simulated - measured) / measured" if measured else "per step, simulated"
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"{'Measured' if measured else 'Simulated'} by "
                                                                f"fabriclab: {source(stored)}")
            + table(head, body, caption=caption) + "</div>")


def _stencil_runs(records: list[Stored]) -> str:
    """`stencil.run` records: one stacked bar (compute + communication per step) per run."""
    fig, ax = new_figure(6.5, 3.6)
    labels = [f"#{s.id}: {s.record['results']['num_ranks']} ranks" for s in records]
    compute = [s.record["results"]["compute_s"] * 1e3 for s in records]
    comm = [s.record["results"]["comm_s"] * 1e3 for s in records]
    ax.bar(labels, compute, color="C7", label="compute")
    ax.bar(labels, comm, bottom=compute, color="C0", label="communication")
    ax.set(xlabel="run (record: ranks)", ylabel="time per step (ms)",
           title="Stencil runs: compute and communication per step")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7)
    alt = f"Stacked bar chart: compute and communication milliseconds per step of {len(records)} stencil runs."
    body = [[f'<a href="#rec-{s.id}">{s.id}</a>', num(s.record["results"]["num_ranks"], s),
             num(s.record["config"].get("cells"), s), num(c, s), num(m, s)] for s, c, m in zip(records, compute, comm)]
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured by fabriclab: {sources(records)}")
            + table(["record", "ranks", "cells per side", "compute ms", "comm ms"], body) + "</div>")


def render_stencil(records: list[Stored]) -> str:
    runs = [s for s in records if s.kind == "stencil.run"]
    out = "".join(safely(_stencil_one, s) for s in records if s.kind in ("stencil.scale", "stencil.simulate"))
    out += safely(lambda _: _stencil_runs(runs), runs[0]) if runs else ""
    out += "".join(rows_table(s) for s in records if s.kind not in ("stencil.run", "stencil.scale",
                                                                       "stencil.simulate"))
    return out


def _validate_one(stored: Stored) -> str:
    rows = result_rows(stored.record["results"])
    if not rows or "measured_s" not in rows[0]:
        return rows_table(stored)
    algos = list(dict.fromkeys(r["algo"] for r in rows))
    fig, (left, right) = new_figure(10, 4.2, ncols=2)
    for i, algo in enumerate(algos):
        mine = [r for r in rows if r["algo"] == algo and r.get("model_s") is not None]
        style = series_style(i)
        left.scatter([r["measured_s"] for r in mine], [r["model_s"] for r in mine], s=14, label=algo,
                     color=style["color"], marker=style["marker"])
        mine.sort(key=lambda r: r["size_bytes"])
        right.plot([r["size_bytes"] for r in mine], [_v(r.get("err_model_pct")) for r in mine], label=algo, **style)
    lo = min(r["measured_s"] for r in rows)
    hi = max(r["measured_s"] for r in rows)
    left.plot([lo, hi], [lo, hi], color="grey", lw=0.8, label="simulated = measured")
    times = [v for r in rows for v in (r["measured_s"], r.get("model_s"))]
    log_axis(left, "x", times, "measured time (s)")
    log_axis(left, "y", times, "simulated time (s)")
    left.set(title="Simulated vs measured, every size")
    right.axhspan(-10, 10, color="green", alpha=0.08, label="|error| <= 10 %")
    right.set(xscale="log", xlabel="message size (bytes, log scale)", ylabel="error of the simulator (%)",
              title="Error = (simulated - measured) / measured")
    for ax in (left, right):
        ax.title.set_fontsize(9)
        ax.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=6)
    alt = (f"Two charts for {len(algos)} collective algorithms ({', '.join(algos)}): left, simulated against "
           f"measured time on log axes with the line of equality; right, the simulator's error in percent "
           f"against message size, with the 10 % band shaded.")
    big = [r for r in rows if r["size_bytes"] >= 1 << 20 and r.get("err_model_pct") is not None]
    within = sum(abs(r["err_model_pct"]) <= 10 for r in big)
    body = [[esc(r.get("topology", "")), esc(r["algo"]), num(r["size_bytes"], stored), num(r["measured_s"] * 1e3, stored),
             num(None if r.get("model_s") is None else r["model_s"] * 1e3, stored), pct(r.get("err_model_pct"), stored)]
            for r in rows if r["size_bytes"] >= 1 << 20]
    summary = (f"<p>Messages of 1 MiB and more: {num(within, stored)} of {num(len(big), stored)} within 10 %.</p>"
               if big else "")
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured and simulated by fabriclab: "
                                                                f"{source(stored)}")
            + table(["topology", "algo", "bytes", "measured ms", "simulated ms", "error"], body,
                    caption="sizes >= 1 MiB; all sizes: fabriclab results show") + "</div>" + summary)


def render_validate(records: list[Stored]) -> str:
    return "".join(safely(_validate_one, s) for s in records)


SECTIONS = (
    Section(key="stencil", title="The stencil: compute vs communication", kinds=("stencil*",),
            fill="fabriclab stencil simulate --ranks 64,256,1024,4096",
            intro="Samsi et al.'s Figure 3: CartDG's compute and communication time per step against cores, on "
                  "25 GbE and 100 Gb Omni-Path (strong scaling). Here: fabriclab's halo-exchange mini-app, "
                  "measured in the emulated cluster (with the simulator's communication beside it) or simulated "
                  "at scale.",
            render=render_stencil, keep=2, pooled=("stencil.run",)),
    Section(key="validate", title="Simulator vs measured", kinds=("validate*",),
            fill="sudo fabriclab validate emulated --topology star --algos ring,native --sizes 1MB,16MB",
            intro="Can the simulator be trusted? Each all-reduce algorithm is timed in the emulated cluster and "
                  "simulated on the same topology; the goal is |error| &le; 10 % from 1 MiB up.",
            render=render_validate),
)
