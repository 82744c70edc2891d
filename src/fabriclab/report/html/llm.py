"""Report section: LLM training steps, simulated (`whatif llm`), with their Perfetto trace drawn in the page.

Records of kind `whatif.llm`, per model and cluster (the newest run of each distinct configuration; a run
repeated is listed, not drawn): the step's headline (step time, tokens/s, MFU, where compute came from), where
the step goes (a bar of compute, exposed communication per communicator, optimizer and bubble), the
trace of the slowest stage as a timeline (one lane per thread: compute, tp, cp, ep, pp, dp, optimizer)
when the record holds one (`--trace`), with the trace itself as a download to open in ui.perfetto.dev,
and the communicators and busiest links as tables. `trace_lanes` draws any Chrome/Perfetto trace of the
same threads, simulated or measured, so two steps can be laid side by side.

Try it: `fabriclab whatif llm --trace /tmp/step.json && fabriclab report --out report/`.
"""

from __future__ import annotations

import base64
import json

from fabriclab.report.html.goodput import goodput_block
from fabriclab.report.html.parts import (Section, anchor, config_key, esc, figure, new_figure, num, safely, source,
                                         table)

KIND = "whatif.llm"
PARTS = ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer", "bubble")
LABELS = {"compute": "compute", "tp": "TP exposed", "cp": "CP exposed", "ep": "EP exposed", "pp": "PP exposed",
          "dp": "DP exposed", "optimizer": "optimizer", "bubble": "pipeline bubble"}


def trace_lanes(ax, events: list[dict], title: str) -> int:
    """Draw a Chrome/Perfetto trace's complete events (`ph` X) as one lane per thread on `ax`, time in ms;
    returns the number of spans drawn."""
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    lanes = [t for t in sorted(names) if any(e["tid"] == t for e in spans)]
    for row, tid in enumerate(lanes):
        mine = [(e["ts"] / 1e3, max(e["dur"] / 1e3, 1e-6)) for e in spans if e["tid"] == tid]
        ax.broken_barh(mine, (row - 0.4, 0.8), color=f"C{row % 10}")
    ax.set_yticks(range(len(lanes)), [names[t] for t in lanes])
    ax.invert_yaxis()
    ax.set(xlabel="time in the step (ms)", title=title)
    ax.title.set_fontsize(9)
    ax.grid(True, axis="x", alpha=0.3)
    return len(spans)


def _split_figure(results: dict, stored) -> str:
    split = results["split_s"]
    fig, ax = new_figure(5.6, 2.0)
    left = 0.0
    for part in (p for p in PARTS if split.get(p, 0) > 0):  # a part has one colour in every figure
        ax.barh(0, split[part], left=left, color=f"C{PARTS.index(part)}", label=f"{LABELS[part]} {split[part]:.3g} s")
        left += split[part]
    ax.set_yticks([])
    ax.set(xlabel="seconds of the step (slowest pipeline stage)")
    ax.set_title(f"{results['model']} on {results['cluster']}, {_short(results['parallel'])}", fontsize=8, pad=28)
    ax.legend(fontsize=6.5, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.02), frameon=False)
    alt = "Stacked bar chart of the step: " + ", ".join(f"{LABELS[p]} {split[p]:.3g} s" for p in PARTS if split.get(p, 0) > 0)
    more = "" if results.get("trace") else " No trace in this record (<code>--trace FILE</code> stores one)."
    return figure(fig, alt=alt, caption=f"where the step goes, step time {results['step_time_s']:.4g} s: "
                                        f"{source(stored)}.{more}")


def _trace_figure(results: dict, stored) -> str:
    events = results.get("trace")
    if not events:
        return ""
    fig, ax = new_figure(6.8, 2.6)
    n = trace_lanes(ax, events, "simulated step, one GPU of the slowest pipeline stage")
    data = base64.b64encode(json.dumps({"traceEvents": events}).encode()).decode("ascii")
    link = (f'<a download="whatif-llm-{stored.id}.trace.json" href="data:application/json;base64,{data}">'
            f"the trace (JSON)</a>")
    return figure(fig, alt=f"Timeline chart of {n} spans in lanes per thread (compute and each communicator).",
                  caption=f"{esc(results['parallel'])}, <a href=\"#{anchor(stored)}\">record {stored.id}</a>; "
                          f"{link}: open it in ui.perfetto.dev or chrome://tracing")


def _head(stored) -> str:
    r = stored.record["results"]
    return (f'<p class="answer">{esc(r["model"])} on {num(r["num_gpus"], stored)} x {esc(r["gpu"])} '
            f"({esc(r['cluster'])}), {esc(r['parallel'])}: step {num(r['step_time_s'], stored)} s, "
            f"{num(r['tokens_per_s'], stored)} tokens/s, MFU {num(100 * r['mfu'], stored, 3, ' %')}. Compute: "
            f"{num(100 * r['efficiency'], stored, 3, ' %')} of peak, {esc(r['efficiency_source'])}.</p>")


def _tables(stored) -> str:
    r = stored.record["results"]
    comm = [[esc(e["communicator"]), esc(e["collective"]), esc(e["group"]), num(e["size_bytes"] / 1e6, stored),
             num(e["calls_per_step"], stored), num(e["time_s"] * 1e3, stored), esc(e["algorithm"])]
            for e in r["communicators"]]
    links = [[esc(x["kind"]), esc(x["link"]), num(x["bandwidth_Bps"] * 8 / 1e9, stored),
              num(x["bytes_per_step"] / 1e9, stored), num(x["busy_s"], stored),
              num(100 * x["share_of_step"], stored, 3, " %"), num(x["num_as_busy"], stored)]
             for x in r.get("busiest_links", [])]
    return ('<div class="pair">'
            + table(["comm", "collective", "group", "MB/call", "calls", "ms/call", "algorithm"], comm,
                    caption=f"communicators, one GPU, one step (record {stored.id})", fold=True)
            + table(["kind", "link", "Gb/s", "GB/step", "busy s", "of step", "links as busy"], links,
                    caption=f"the busiest link of each kind, every group's traffic at once (record {stored.id})",
                    fold=True)
            + "</div>")


def _one(stored) -> str:
    r = stored.record["results"]
    return (_head(stored) + '<div class="pair">' + _split_figure(r, stored) + _trace_figure(r, stored) + "</div>"
            + _tables(stored))


def _short(parallel: str) -> str:
    """`TP8 PP4 CP1 DP32` of `TP8 PP4 CP1 DP32 (mbs 1, gbs 512, ...)`: a bar's label."""
    return parallel.split(" (")[0]


def _group_figure(records: list) -> str:
    """One bar per configuration of one model on one cluster: where each step goes."""
    fig, ax = new_figure(7.4, 1.3 + 0.4 * len(records))
    labels, used = [], {}
    for row, stored in enumerate(records):
        r = stored.record["results"]
        left = 0.0
        for i, part in enumerate(PARTS):
            value = r["split_s"].get(part, 0)
            if value > 0:
                ax.barh(row, value, left=left, color=f"C{i}", label="_" if part in used else LABELS[part])
                used[part] = True
                left += value
        labels.append(f"{_short(r['parallel'])}, {r['num_gpus']:,} GPUs (rec. {stored.id})")
    ax.set_yticks(range(len(records)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="seconds of the step (slowest pipeline stage)")
    first = records[0].record["results"]
    ax.set_title(f"{first['model']} on {first['cluster']}: where each configuration's step goes", fontsize=9)
    ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    alt = (f"Stacked bar chart of {len(records)} configurations of {first['model']} on {first['cluster']}: "
           + "; ".join(f"{_short(s.record['results']['parallel'])} step {s.record['results']['step_time_s']:.3g} s"
                       for s in records))
    return figure(fig, alt=alt, caption="where the step goes per configuration: "
                                        + "; ".join(f'<a href="#{anchor(s)}">record {s.id}</a>' for s in records))


def _steps_table(records: list) -> str:
    body = []
    for s in records:
        r = s.record["results"]
        body.append([esc(r["model"]), esc(r["cluster"]), num(r["num_gpus"], s), esc(_short(r["parallel"])),
                     num(r["step_time_s"], s), num(r["tokens_per_s"], s), num(100 * r["mfu"], s, 3, " %"),
                     num(100 * r["efficiency"], s, 3, " %"), "measured" if r.get("efficiency_measured") else "assumed",
                     f'<a href="#{anchor(s)}">{s.id}</a>'])
    return table(["model", "cluster", "GPUs", "layout", "step (s)", "tokens/s", "MFU", "of peak", "compute",
                  "record"], body, caption="every configuration drawn, one row each (the split: the figures)",
                 fold=False)


def render(records: list) -> str:
    """The steps per model and cluster (newest first): one table of all, one figure per model and cluster
    (a bar per configuration), the traces stored, and each step's communicators and links folded."""
    if len(records) == 1:
        return safely(_one, records[0]) + safely(lambda _: goodput_block(records), records[0])
    groups: dict = {}
    for s in records:
        r = s.record.get("results") or {}
        groups.setdefault((r.get("model"), r.get("cluster")), []).append(s)
    ordered = [s for mine in groups.values() for s in mine]
    figures = [safely(lambda _, m=mine: _group_figure(m) if len(m) > 1 else _split_figure(m[0].record["results"],
                                                                                         m[0]), mine[0])
               for mine in groups.values()]
    traces = [safely(lambda s: _trace_figure(s.record["results"], s), s) for s in ordered]
    return (safely(lambda _: _steps_table(ordered), ordered[0]) + '<div class="pair">' + "".join(figures + traces)
            + "</div>" + safely(lambda _: goodput_block(ordered), ordered[0])
            + "".join(safely(_tables, s) for s in ordered))


SECTIONS = (
    Section(key="llm", title="LLM training steps", kinds=(KIND,),
            fill="fabriclab whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4 --trace step.json",
            intro="A transformer's training step with tensor, pipeline, context, expert and sharded data "
                  "parallelism on a cluster, simulated: where the step goes, the slowest stage's timeline, "
                  "what every communicator sends and which links carry it.",
            render=render, keep=12, distinct=config_key),
)
