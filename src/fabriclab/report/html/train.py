"""Report sections for training runs: images/sec vs workers per fabric and algorithm, S-Caffe's modes.

Images/sec (`bench.fabrics`, `train.bench`): Samsi et al. ("Benchmarking network fabrics for data
distributed training of deep neural networks", TX-GAIA) compare 25 GbE with 100 Gb Omni-Path, images/sec
against GPUs; fabriclab measures the same in its emulated cluster and puts the simulator's and the
what-if's prediction, with their error, beside each point. S-Caffe (`bench.train`, Awan et al., PPoPP'17):
the reduce-based designs SC-B, SC-OB and SC-OBR (no overlap, overlapped broadcast, overlapped broadcast
and reduce) and the other sync modes of fabriclab's trainer, each beside PyTorch DDP in the same run.

Try it: `fabriclab bench train --modes reduce:cb/none,reduce:cb/forward,reduce:cb/backward --steps 5`.
"""

from __future__ import annotations

from fabriclab.report.html.parts import (Section, esc, figure, new_figure, num, pct, safely, series_style,
                                         source, sources, table)
from fabriclab.report.store_views import Stored

# Samsi et al.'s average images/sec shortfall of 25 GbE against 100 Gb Omni-Path, up to 512 GPUs.
try:
    from fabriclab.bench.fabrics import SAMSI_MEASURED_DIFFERENCE_PCT as SAMSI_DIFFERENCE_PCT
except ImportError:  # the constant moved or was renamed: the report says nothing rather than guess
    SAMSI_DIFFERENCE_PCT = None
# fabriclab's overlap modes under S-Caffe's names (Awan et al., Section 4).
SCAFFE = {"none": "SC-B", "forward": "SC-OB", "backward": "SC-OBR"}
FABRIC_LABELS = {"25gbe": "25 GbE", "100g-opa": "100 Gb Omni-Path"}


def _fabrics_one(stored: Stored) -> str:
    results = stored.record["results"]
    rows = results["rows"] if isinstance(results, dict) else results
    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    algos = list(dict.fromkeys(r["algo"] for r in rows))
    fig, axes = new_figure(4.2 * len(algos) + 1, 4.4, ncols=len(algos))
    axes = axes if isinstance(axes, list) else [axes]
    for ax, algo in zip(axes, algos):
        for i, fabric in enumerate(fabrics):
            mine = sorted((r for r in rows if r["fabric"] == fabric and r["algo"] == algo), key=lambda r: r["workers"])
            w = [r["workers"] for r in mine]
            style = series_style(i)
            name = FABRIC_LABELS.get(fabric, fabric)
            ax.plot(w, [r["images_per_sec"] for r in mine], ls="-", label=f"{name} measured", **style)
            ax.plot(w, [r.get("sim_images_per_sec") for r in mine], ls="--", color=style["color"], marker="x",
                    label=f"{name} simulator")
            ax.plot(w, [r.get("whatif_images_per_sec") for r in mine], ls=":", color=style["color"], marker=".",
                    label=f"{name} what-if")
        ax.set_xticks(sorted({r["workers"] for r in rows}))
        ax.set(title=f"all-reduce {algo}", xlabel="workers (GPUs)", ylabel="images/sec (un-dilated, per second)")
        ax.title.set_fontsize(9)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    alt = (f"Line charts, one per all-reduce algorithm ({', '.join(algos)}): training images per second against "
           f"the number of workers on {', '.join(FABRIC_LABELS.get(f, f) for f in fabrics)}, measured in the "
           f"emulated cluster (solid) beside the simulator's (dashed) and the what-if's (dotted) prediction.")
    head = ["fabric", "algo", "workers", "measured img/s", "simulator img/s", "error", "what-if img/s", "error"]
    body = [[esc(FABRIC_LABELS.get(r["fabric"], r["fabric"])), esc(r["algo"]), num(r["workers"], stored),
             num(r["images_per_sec"], stored), num(r.get("sim_images_per_sec"), stored), pct(r.get("sim_err_pct"), stored),
             num(r.get("whatif_images_per_sec"), stored), pct(r.get("whatif_err_pct"), stored)] for r in rows]
    out = ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured and predicted by fabriclab: {source(stored)}")
           + table(head, body, caption="error = (predicted - measured) / measured") + "</div>")
    diff = results.get("difference") if isinstance(results, dict) else None
    if diff:
        published = (f"; Samsi et al. measured {SAMSI_DIFFERENCE_PCT} % on up to 512 V100 GPUs"
                     if SAMSI_DIFFERENCE_PCT is not None else "")
        out += (f"<p>25 GbE delivers on average {num(diff['measured_pct'], stored, 4, ' %')} fewer images/sec than "
                f"100 Gb Omni-Path over {num(diff['points'], stored)} points (simulator "
                f"{num(diff['sim_pct'], stored, 4, ' %')}, what-if {num(diff['whatif_pct'], stored, 4, ' %')})"
                f"{published}.</p>")
    return out


def _train_points(records: list[Stored]) -> list[tuple[Stored, dict]]:
    """One point per runtime of each `train.bench` record: series name, ranks, images/sec, scaling."""
    points = []
    for s in records:
        config, results = s.record["config"], s.record["results"]
        trainer = config.get("trainer") or {}
        replay = config.get("replay")
        what = f"replay of {replay} x{config.get('dilation', 1):g}" if replay else config.get("model", "?")
        for runtime, summary in results["runtimes"].items():
            series = (f"{what}, DDP" if runtime == "ddp" else
                      f"{what}, ours {trainer.get('sync', '?')}/{trainer.get('overlap', '?')}")
            points.append((s, {"series": series, "ranks": results["num_ranks"], "replay": bool(replay),
                               "images_per_sec": summary["images_per_sec"],
                               "scaling_factor": summary.get("scaling_factor")}))
    return points


def _train(records: list[Stored]) -> str:
    points = _train_points(records)
    series = list(dict.fromkeys(p["series"] for _, p in points))
    kinds = [k for k in (False, True) if any(p["replay"] == k for _, p in points)]
    fig, axes = new_figure(4.6 * len(kinds) + 0.6, 4.2, ncols=len(kinds))
    axes = axes if isinstance(axes, list) else [axes]
    for ax, replay in zip(axes, kinds):  # real computation and dilated replays never share an axis
        for i, name in enumerate(series):
            mine = sorted((p for _, p in points if p["series"] == name and p["replay"] == replay),
                          key=lambda p: p["ranks"])
            if mine:
                ax.plot([p["ranks"] for p in mine], [p["images_per_sec"] for p in mine], label=name,
                        **series_style(i))
        ranks = sorted({p["ranks"] for _, p in points if p["replay"] == replay})
        ax.set_xticks(ranks, [str(n) for n in ranks])
        ax.set_xlim(min(ranks) - 0.5, max(ranks) + 0.5)
        ax.set_ylim(bottom=0)
        ax.set(title="dilated replays (profiled times x dilation)" if replay else "real computation (this CPU)",
               xlabel="ranks (workers)", ylabel="images/sec (of the dilated run)" if replay else
               "images/sec (measured)")
        ax.title.set_fontsize(9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, title="model, runtime, sync/overlap", title_fontsize=7)
    fig.suptitle("fabriclab train: images/sec vs ranks", fontsize=10)
    alt = (f"Line chart: measured training images per second against the number of ranks for {len(series)} "
           f"runtime and sync settings, from {len(records)} runs of fabriclab train; runs that compute and "
           f"dilated replays of profiled times in separate panels.")
    body = [[esc(p["series"]), "dilated replay" if p["replay"] else "computed", num(p["ranks"], s),
             num(p["images_per_sec"], s), num(p["scaling_factor"], s), f'<a href="#rec-{s.id}">{s.id}</a>']
            for s, p in sorted(points, key=lambda sp: (sp[1]["replay"], sp[1]["series"], sp[1]["ranks"]))]
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured by fabriclab: {sources(records)}")
            + table(["series", "compute", "ranks", "images/sec", "scaling factor", "record"], body) + "</div>")


def render_throughput(records: list[Stored]) -> str:
    fabrics = [s for s in records if s.kind == "bench.fabrics"]
    trains = [s for s in records if s.kind != "bench.fabrics"]
    out = "".join(safely(_fabrics_one, s) for s in fabrics)
    if trains:
        out += "<h3>fabriclab train runs</h3>" + safely(lambda _: _train(trains), trains[0])
    return out


def _modes_one(stored: Stored) -> str:
    rows = stored.record["results"]
    rows = rows["rows"] if isinstance(rows, dict) else rows
    labels = []
    for r in rows:
        overlap = r["mode"].split("/")[1] if "/" in r["mode"] else ""
        labels.append(r["mode"] + (f" ({SCAFFE[overlap]})" if r["mode"].startswith("reduce:") and overlap in SCAFFE
                                   else ""))
    fig, ax = new_figure(7.0, 1.2 + 0.42 * len(rows))
    ys = list(range(len(rows)))
    ax.barh([y + 0.2 for y in ys], [r["ours_images_per_sec"] for r in rows], height=0.4, color="C0",
            label="fabriclab trainer")
    ax.barh([y - 0.2 for y in ys], [r["ddp_images_per_sec"] for r in rows], height=0.4, color="C7",
            label="PyTorch DDP (same run)")
    ax.set_yticks(ys, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="images/sec", title="Sync and overlap modes beside DDP")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    alt = (f"Horizontal bar chart: images per second of {len(rows)} sync / overlap modes of fabriclab's trainer, "
           f"each beside PyTorch DDP measured in the same run; S-Caffe's designs are marked SC-B, SC-OB, SC-OBR.")
    head = ["mode", "ours img/s", "DDP img/s", "ours / DDP", "iteration ms", "exposed comm ms", "CPU ms"]
    body = [[esc(label), num(r["ours_images_per_sec"], stored), num(r["ddp_images_per_sec"], stored),
             num(r["ratio"], stored), num(r.get("iteration_ms"), stored), num(r.get("exposed_ms"), stored),
             num(r.get("cpu_ms"), stored)] for label, r in zip(labels, rows)]
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured by fabriclab: {source(stored)}")
            + table(head, body) + "</div>")


def render_modes(records: list[Stored]) -> str:
    return "".join(safely(_modes_one, s) for s in records)


SECTIONS = (
    Section(key="throughput", title="Images/sec vs workers, per fabric and algorithm",
            kinds=("bench.fabrics", "train.bench"),
            fill="sudo fabriclab bench fabrics --workers 2,4 --algos ring --steps 2 (or fabriclab train --np 2)",
            intro="Samsi et al. (&ldquo;Benchmarking network fabrics for data distributed training of deep neural "
                  "networks&rdquo;, TX-GAIA) measure images/sec against GPUs on 25 GbE and 100 Gb Omni-Path. Here: "
                  "fabriclab's training in the emulated cluster (links scaled down, compute replayed) with the "
                  "flow simulator's and the what-if's prediction and their error beside every point.",
            render=render_throughput, keep=2, pooled=("train.bench",)),
    Section(key="scaffe", title="S-Caffe's designs side by side", kinds=("bench.train",),
            fill="fabriclab bench train --modes all",
            intro="Awan et al. (S-Caffe, PPoPP'17) co-design the reduce with the framework: SC-B (reduce, then "
                  "broadcast), SC-OB (the broadcast overlaps the next forward pass) and SC-OBR (the reduce "
                  "overlaps backward too). Here: each mode of fabriclab's trainer beside PyTorch DDP, measured in "
                  "the same run.",
            render=render_modes, keep=2),
)
