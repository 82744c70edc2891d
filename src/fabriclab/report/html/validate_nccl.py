"""Report section: the NCCL model against a corpus of real clusters' nccl-tests runs.

Records of kind `validate.nccl-tests` (`fabriclab validate nccl-tests`): every corpus cluster fitted on its
smaller runs and its larger ones predicted. Per size band (64-512 KB, 1-16 MB, >= 64 MB) a chart of each
cluster's median and largest |error| against the band's goal, and a table with the share of predicted rows
the printed busbw ranges hold; clusters measured degraded are marked `!` and kept out of the `all` row.

Try it: `fabriclab validate nccl-tests && fabriclab report --out report/`.
"""

from __future__ import annotations

from fabriclab.report.html.parts import Section, each, esc, figure, new_figure, num, source, table
from fabriclab.report.store_views import Stored

KIND = "validate.nccl-tests"
_MODEL_WORDS = {"baseline": "before", "mechanisms": "after"}


def _band(stored: Stored, band: str, rows: list[dict]) -> str:
    clusters = [r for r in rows if r["cluster"] not in ("all", "all+degraded")]
    goal = rows[0]["goal_pct"]
    fig, ax = new_figure(6.5, 0.9 + 0.28 * len(clusters))
    names = [f"{r['cluster']}{' !' if r.get('degraded') else ''} ({_MODEL_WORDS.get(r['model'], r['model'])})"
             for r in clusters]
    ys = list(range(len(clusters)))
    ax.barh([y + 0.18 for y in ys], [r["median_abs_error_pct"] for r in clusters], height=0.36, label="median row")
    ax.barh([y - 0.18 for y in ys], [r["max_abs_error_pct"] for r in clusters], height=0.36, label="worst row")
    ax.axvline(goal, color="k", linestyle="--", linewidth=1, label=f"goal {goal:g} %")
    ax.set_yticks(ys, names, fontsize=7)
    ax.set_xscale("symlog", linthresh=10)
    ax.set(xlabel="|error| of predicted busbw, % (log beyond 10)", title=f"{band}: fit small, predict large")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    alt = (f"Horizontal bar chart for the {band} band: per corpus cluster the median and the worst |error| in "
           f"percent of the predicted busbw, with the goal of {goal:g} % as a dashed line.")
    body = []
    for r in rows:
        name = {"all": f"all ({r.get('clusters', '')})", "all+degraded": f"+degraded ({r.get('clusters', '')})"}.get(
            r["cluster"], r["cluster"] + (" !" if r.get("degraded") else ""))
        share = r["inside"] / r["ranged"] * 100 if r["ranged"] else None
        body.append([esc(name), esc(_MODEL_WORDS.get(r["model"], r["model"])), num(r["rows"], stored),
                     num(r["median_abs_error_pct"], stored, 3, " %"), num(r["max_abs_error_pct"], stored, 3, " %"),
                     esc("yes" if r["within_goal"] else "median" if r["median_within_goal"] else "no"),
                     num(share, stored, 3, " %") if share is not None else "-"])
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"{esc(band)}: {source(stored)}")
            + table(["cluster", "model", "rows", "median |error|", "max |error|", "goal", "rows in range"], body,
                    caption=esc("! measured degraded (as posted): shown, not counted in all"))
            + "</div>")


def _one(stored: Stored) -> str:
    from fabriclab.bench.validate.nccl_tests import coverage_line

    bands = stored.record["results"]["bands"]
    order = list(dict.fromkeys(r["band"] for r in bands))
    covered = "".join(f"<p>{esc(coverage_line(row))}</p>"
                      for row in stored.record["results"].get("coverage", []))  # (records before it: none)
    return "".join(_band(stored, band, [r for r in bands if r["band"] == band]) for band in order) + covered


render = each(_one)

SECTIONS = (
    Section(key="nccl-corpus", title="NCCL model against real clusters (nccl-tests corpus)", kinds=(KIND,),
            fill="fabriclab validate nccl-tests",
            intro="Published nccl-tests runs of real A100, H100, H200 and B200 clusters on InfiniBand, RoCE and "
                  "TCP offload (<code>examples/nccl-corpus</code>, each with its source): the model is fitted "
                  "on each cluster's smaller runs (or the small and large sizes of its one run) and predicts the "
                  "rest. Goals: 64-512 KB within 35 %, 1-16 MB within 25 %, &ge; 64 MB within 10 %; the printed "
                  "busbw ranges should hold 90 % of the predicted rows.",
            render=render),
)
