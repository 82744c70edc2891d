"""Report section: a transformer's real TP x PP x DP step in the emulated cluster against `whatif llm`.

Records of kind `validate.llm` (`fabriclab validate emulated --workload llm`): per part of the step
(compute, TP, EP, PP, DP, optimizer, bubble) the measured and the predicted time per step (a bar chart)
and the table with the error and the goal.

Try it: `sudo fabriclab validate emulated --workload llm --model gpt-mini --gpus-per-server 1 --tp 1 --pp 2
--gbs 4 --link 50Mbps && fabriclab report --out report/`.
"""

from __future__ import annotations

from fabriclab.report.html.parts import Section, each, esc, figure, new_figure, num, pct, source, table
from fabriclab.report.store_views import Stored

KIND = "validate.llm"


def _one(stored: Stored) -> str:
    results = stored.record["results"]
    rows = results["rows"]
    parts = [r for r in rows if r["measured_s"] > 0 or r["predicted_s"] > 0]
    fig, ax = new_figure(6.5, 3.6)
    xs = range(len(parts))
    ax.bar([x - 0.2 for x in xs], [r["measured_s"] * 1e3 for r in parts], width=0.4, label="measured")
    ax.bar([x + 0.2 for x in xs], [r["predicted_s"] * 1e3 for r in parts], width=0.4, label="whatif llm")
    ax.set_xticks(list(xs), [r["part"] for r in parts])
    ax.set(ylabel="ms per step", title=f"{results['parallel']}")
    ax.title.set_fontsize(8)
    ax.legend(fontsize=7)
    alt = (f"Bar chart: milliseconds per training step by part ({', '.join(r['part'] for r in parts)}), measured "
           f"in the emulated cluster beside the prediction.")
    body = [[esc(r["part"]), num(r["measured_s"] * 1e3, stored), num(r["predicted_s"] * 1e3, stored),
             num(r["share"] * 100, stored, 3, " %"), pct(None if r["error"] is None else r["error"] * 100, stored),
             esc("-" if r["ok"] is None else ("ok" if r["ok"] else "MISS"))] for r in rows]
    cal = results["calibration"]
    note = (f"calibration: 1-rank step {cal['one_rank_step_s'] * 1e3:.1f} ms; Gloo through the kernel "
            f"{cal['loopback_step_s'] * 1e6:.0f} us per ring step; {'PASS' if results['passed'] else 'FAIL'}")
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured and predicted: {source(stored)}")
            + table(["part", "measured ms", "predicted ms", "share", "error", "goal"], body, caption=esc(note))
            + "</div>")


render = each(_one)

SECTIONS = (
    Section(key="llm-check", title="A transformer's step: measured vs whatif llm", kinds=(KIND,),
            fill="sudo fabriclab validate emulated --workload llm --model gpt-mini --gpus-per-server 1 --tp 1 "
                 "--pp 2 --gbs 4 --link 50Mbps",
            intro="Is the simulated TP / PP / DP traffic, overlap and bubble right on a real network? A small GPT "
                  "is trained for real in the emulated cluster and its step, split as the simulator splits it, "
                  "is laid beside <code>whatif llm</code>'s prediction (compute calibrated on a 1-rank run). Goal: "
                  "step within 15 %, each communicator above 10 % of the step within 25 %.",
            render=render),
)
