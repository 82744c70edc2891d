"""Report sections: the cluster fitted to nccl-tests logs, and the main job's collectives benchmark.

Calibration (`calibrate.nccl-tests`): busbw against size per log, measured (points) beside the fitted
model (lines); the parameters as a readable table (value, prior, where it comes from); the |error| per
size band; every row's residual folded away. Main job (`collectives.bench`, `fabriclab run`): busbw
against size per algorithm, and the nccl-tests table with people's headers.

Try it: `fabriclab calibrate nccl-tests examples/nccl-tests-a100/nccl_{2,4,8,16}.log --out a.json && fabriclab run
&& fabriclab report --out report/`.
"""

from __future__ import annotations

from pathlib import Path

from fabriclab.nccl.fit import source_word
from fabriclab.report.calibrate import band_summary, band_table_rows, measured_busbw, switch_notes
from fabriclab.report.html.parts import (Section, esc, figure, log_axis, new_figure, num, pct, safely, series_style,
                                         source, table)
from fabriclab.report.store_views import Stored


def _quantity(name: str, value, stored: Stored) -> str:
    """A parameter in its unit (GB/s, us, ps/B, or a plain factor), linked to its record."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return esc(value)
    if name.endswith("_Bps"):
        return num(value / 1e9, stored, 4, " GB/s")
    if name.endswith("per_byte_s"):
        return num(value * 1e12, stored, 4, " ps/B")
    if name.endswith("_s"):
        return num(value * 1e6, stored, 4, " us")
    return num(value, stored, 4)


def _calibrate_one(stored: Stored) -> str:
    results = stored.record["results"]
    residuals = results["residuals"]
    logs = list(dict.fromkeys((r["source"], r["num_gpus"], r["collective"]) for r in residuals))
    fig, ax = new_figure(7.5, 4.6)
    for i, (src, gpus, coll) in enumerate(logs):
        mine = sorted((r for r in residuals if (r["source"], r["num_gpus"], r["collective"]) == (src, gpus, coll)),
                      key=lambda r: r["size_bytes"])
        style = series_style(i)
        held = " (held out)" if any(r["held_out"] for r in mine) else ""
        ax.plot([r["size_bytes"] for r in mine], [measured_busbw(r) for r in mine], ls="none", marker=style["marker"],
                color=style["color"], ms=4, label=f"{gpus} GPUs measured{held}")
        ax.plot([r["size_bytes"] for r in mine], [r["predicted_busbw_GBps"] for r in mine], ls="-", lw=1.2,
                color=style["color"], label=f"{gpus} GPUs model")
    log_axis(ax, "x", [r["size_bytes"] for r in residuals], "message size (bytes)")
    log_axis(ax, "y", [measured_busbw(r) for r in residuals], "busbw (GB/s)")
    ax.set(title=f"nccl-tests {logs[0][2]}: measured (points) vs fitted model (lines), NCCL "
                 f"{results.get('nccl_version', '?')}'s tuning")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    alt = (f"Log-log chart: bus bandwidth in GB/s against message size for {len(logs)} nccl-tests logs "
           f"({', '.join(f'{g} GPUs' for _, g, _ in logs)}), measured as points and the fitted model as lines.")
    params = results.get("parameters") or {}
    prow = [[esc(name.replace("library.", "").replace("server.", "")), _quantity(name, p.get("value"), stored),
             _quantity(name, p.get("prior"), stored),
             esc(source_word(bool(p.get("fitted")), bool(p.get("at_bound")), p.get("value"), p.get("prior")))]
            for name, p in params.items() if isinstance(p, dict)]
    headers, _ = band_table_rows(residuals)
    summary = band_summary(residuals)
    several = len({b["collective"] for b in summary}) > 1
    bands = []
    for key in dict.fromkeys((b["num_gpus"], b["collective"]) for b in summary):
        cells = {b["band"]: f"{num(b['median_abs_error_pct'], stored, 3)} / {num(b['max_abs_error_pct'], stored, 3)}"
                 for b in summary if (b["num_gpus"], b["collective"]) == key}
        bands.append([num(key[0], stored), *([esc(key[1])] if several else []),
                      *(cells.get(h, "-") for h in headers[2 if several else 1:])])
    notes = "".join(f'<p class="note">{esc(n)}.</p>' for n in switch_notes(residuals))
    rows = [[esc(Path(r["source"]).name), num(r["num_gpus"], stored), num(r["size_bytes"], stored), esc(r["choice"]),
             num(measured_busbw(r), stored), num(r["predicted_busbw_GBps"], stored), pct(r["error_pct"], stored),
             "held out" if r["held_out"] else "fitted"] for r in residuals]
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Fitted by fabriclab: {source(stored)}")
            + table(headers, bands,
                    caption="|error| of busbw per size band, median / max (%)") + "</div>" + notes
            + table(["parameter", "value", "prior", "from"], prow, fold=True,
                    caption=f"the {len(prow)} parameters of the fitted cluster")
            + table(["log", "GPUs", "bytes", "NCCL runs", "measured GB/s", "model GB/s", "error", "row"], rows,
                    caption="every row's residual (busbw from the log's time; error = model / measured - 1)"))


def render_calibrate(records: list[Stored]) -> str:
    return "".join(safely(_calibrate_one, s) for s in records)


# The nccl-tests columns of `collectives bench` under the names people read.
BENCH_HEADERS = {"algo": "algorithm", "size_bytes": "bytes", "time_us": "time (us)", "algbw_GBps": "algbw (GB/s)",
                 "busbw_GBps": "busbw (GB/s)", "busbw_vs_native": "busbw vs native", "num_wrong": "wrong results"}


def _bench_one(stored: Stored) -> str:
    rows = stored.record["results"]
    config = stored.record.get("config") or {}
    algos = list(dict.fromkeys(r["algo"] for r in rows))
    fig, ax = new_figure(7.0, 4.3)
    for i, algo in enumerate(algos):
        mine = sorted((r for r in rows if r["algo"] == algo), key=lambda r: r["size_bytes"])
        ax.plot([r["size_bytes"] for r in mine], [r["busbw_GBps"] for r in mine], label=algo, **series_style(i))
    log_axis(ax, "x", [r["size_bytes"] for r in rows], "message size (bytes)")
    log_axis(ax, "y", [r["busbw_GBps"] for r in rows if r["busbw_GBps"] > 0], "busbw (GB/s)")
    ranks = config.get("num_ranks", "?")
    ax.set(title=f"{rows[0].get('op', 'allreduce')} on {ranks} local ranks: bus bandwidth per algorithm")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, title="algorithm", title_fontsize=7)
    alt = (f"Log-log line chart: bus bandwidth in GB/s against message size for {len(algos)} algorithms "
           f"({', '.join(algos)}) on {ranks} local ranks.")
    cols = [c for c in BENCH_HEADERS if any(r.get(c) is not None for r in rows)]
    body = [[esc(r[c]) if c == "algo" else num(r.get(c), stored) for c in cols] for r in rows]
    wrong = sum(r.get("num_wrong") or 0 for r in rows)
    verdict = ("every result checked correct" if not wrong else f"{wrong} wrong results")
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured by fabriclab: {source(stored)}")
            + "</div>" + f"<p>{len(rows)} measurements, {esc(verdict)} (nccl-tests' busbw: algbw x 2(n-1)/n for "
            f"all-reduce).</p>" + table([BENCH_HEADERS[c] for c in cols], body, caption="the benchmark's table"))


def render_bench(records: list[Stored]) -> str:
    return "".join(safely(_bench_one, s) for s in records)


SECTIONS = (
    Section(key="calibrate", title="Calibration: the cluster fitted to nccl-tests",
            kinds=("calibrate.nccl-tests",),
            fill="fabriclab calibrate nccl-tests examples/nccl-tests-a100/nccl_{1,2,4,8,16}.log --out a100.json",
            intro="How well does one cluster model explain real nccl-tests logs? The model (NCCL's own "
                  "algorithm and protocol choice, the fitted links and latencies) beside each log's busbw, the "
                  "parameters it fitted, and the error per size band (its prediction of a larger run, <code>fabriclab "
                  "simulate collective --cluster FILE</code>, is drawn under Collectives predicted).",
            render=render_calibrate, keep=2),
    Section(key="main-job", title="Main job: the collectives benchmark", kinds=("collectives.bench",),
            fill="fabriclab run", intro="The main job (<code>fabriclab run</code>, or <code>fabriclab "
                                        "collectives bench</code>): fabriclab's all-reduce algorithms and the "
                                        "native one, timed on local ranks, nccl-tests style.",
            render=render_bench, keep=2),
)
