"""Report section: collective predictions, one figure per collective.

Records of kind `simulate.cluster` (`fabriclab simulate collective --cluster C --gpus N --collective X`):
per collective, the predicted busbw against size of every distinct cluster and GPU count (a line each,
the range the cluster's fit leaves shaded), and each prediction's table; records of kind
`simulate.collective` (one algorithm on a modelled topology, `simulate collective --algo ring`): per
collective, one row per run (algorithm, topology, size, time, busbw, busiest link).

Try it: `fabriclab simulate collective --cluster dgx-h100 --gpus 1024 --sizes 1MB,64MB,1GB && fabriclab report`.
"""

from __future__ import annotations

from fabriclab.report.html.parts import (Section, config_key, esc, figure, log_axis, new_figure, num, safely,
                                         series_style, source, table)
from fabriclab.report.store_views import Stored


def _what(stored: Stored) -> str:
    c = stored.record.get("config") or {}
    return f"{c.get('num_gpus', '?')} GPUs of {c.get('cluster_name') or c.get('cluster', '?')}"


def _cluster_group(collective: str, records: list[Stored]) -> str:
    fig, ax = new_figure(6.8, 4.0)
    sizes, values = [], []
    for i, stored in enumerate(records):
        rows = sorted(stored.record["results"], key=lambda r: r["size_bytes"])
        xs = [r["size_bytes"] for r in rows]
        style = series_style(i)
        ax.plot(xs, [r["busbw_GBps"] for r in rows], label=f"{_what(stored)} (record {stored.id})", **style)
        if all(r.get("busbw_low_GBps") is not None for r in rows):
            ax.fill_between(xs, [r["busbw_low_GBps"] for r in rows], [r["busbw_high_GBps"] for r in rows],
                            color=style["color"], alpha=0.12)
        sizes += xs
        values += [v for r in rows for v in (r["busbw_GBps"], r.get("busbw_low_GBps"), r.get("busbw_high_GBps")) if v]
    log_axis(ax, "x", sizes, "message size (bytes)")
    log_axis(ax, "y", values, "busbw (GB/s)")
    ax.set_title(f"Predicted nccl-tests busbw of {collective} (shaded: the range the fit leaves)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    alt = (f"Log-log line chart: predicted bus bandwidth in GB/s of {collective} against message size on "
           + "; ".join(_what(s) for s in records) + ", each with its range shaded.")
    tables = "".join(table(["bytes", "NCCL runs", "time (us)", "busbw (GB/s)", "low", "high"],
                           [[num(r["size_bytes"], s), esc(r.get("algorithm", "")), num(r["time_us"], s),
                             num(r["busbw_GBps"], s), num(r.get("busbw_low_GBps"), s),
                             num(r.get("busbw_high_GBps"), s)]
                            for r in sorted(s.record["results"], key=lambda r: r["size_bytes"])],
                           caption=f"{esc(collective)} on {esc(_what(s))}, record {s.id}", fold=True)
                     for s in records)
    return ('<div class="pair">' + figure(fig, alt=alt, caption="Predicted by fabriclab: "
                                          + "; ".join(source(s) for s in records)) + "</div>" + tables)


def _simulated_rows(collective: str, records: list[Stored]) -> str:
    body = []
    for s in records:
        c, r = s.record.get("config") or {}, s.record["results"]
        topo = c.get("topology") or {}
        busiest = (r.get("busiest_links") or [{}])[0]
        body.append([esc(c.get("algo", "")), esc(f"{topo.get('kind', '?')}, {topo.get('hosts', '?')} hosts"),
                     num(r.get("num_ranks"), s), num(c.get("size_bytes"), s), num(r["time_s"] * 1e3, s),
                     num(r["busbw_Bps"] / 1e9, s), esc(busiest.get("link", "-"))])
    return table(["algorithm", "topology", "ranks", "bytes", "time (ms)", "busbw (GB/s)", "busiest link"], body,
                 caption=f"{esc(collective)} simulated on modelled topologies (flow level)")


def render(records: list[Stored]) -> str:
    """Per collective: the cluster predictions in one figure, the simulated runs in one table."""
    by: dict[tuple[str, str], list[Stored]] = {}
    for s in records:
        collective = (s.record.get("config") or {}).get("collective", "allreduce")
        by.setdefault((collective, s.kind), []).append(s)
    out = []
    for collective in dict.fromkeys(c for c, _ in by):
        out.append(f"<h3>{esc(collective)}</h3>")
        for kind, draw in (("simulate.cluster", _cluster_group), ("simulate.collective", _simulated_rows)):
            mine = by.get((collective, kind))
            if mine:
                out.append(safely(lambda _, mine=mine, draw=draw: draw(collective, mine), mine[0]))
    return "".join(out)


SECTIONS = (
    Section(key="predictions", title="Collectives predicted", kinds=("simulate.cluster", "simulate.collective"),
            fill="fabriclab simulate collective --cluster dgx-h100 --gpus 1024 --sizes 1MB,64MB,1GB",
            intro="A cluster's library model (NCCL's algorithm and protocol per size, its links and latencies) "
                  "predicting nccl-tests' busbw at any GPU count, per collective; and single algorithms "
                  "simulated on a modelled topology.",
            render=render, keep=12, distinct=config_key),
)
