"""Table and Samsi et al.'s Figures 4 and 5 for the emulated fabric benchmark (`bench.fabrics`).

Samsi et al.'s Figure 4 plots images/sec against GPUs on 25 GbE and on 100 Gb Omni-Path; Figure 5 the same
for three all-reduce strategies. Here each is drawn from the benchmark's rows: measured (solid), the
simulator's prediction (dashed) and the what-if's (dotted), all un-dilated (the real fabric's speed).
`write_fabrics_outputs` writes a run's `--out` folder.

Try it: `sudo fabriclab bench fabrics --workers 2,4 --algos ring --steps 2 --out results/fabrics`.
"""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.table import Table

from fabriclab.record import write_outputs
from fabriclab.report.stencil import FABRIC_LABELS

FABRICS_KIND = "bench.fabrics"


def fabrics_table(rows: list[dict]) -> Table:
    """One row per point: measured images/sec and both predictions with their errors."""
    t = Table(title="training images/sec on emulated fabrics, un-dilated (the real fabric's speed); "
                    "errors: (predicted - measured) / measured", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False)
    for h in ("fabric", "workers", "algo", "img/s", "jitter", "iter ms", "exposed ms", "sim img/s", "sim err",
              "what-if img/s", "what-if err", "params"):
        t.add_column(h, justify="left" if h in ("fabric", "algo") else "right", no_wrap=True)
    for r in rows:
        t.add_row(r["fabric"], str(r["workers"]), r["algo"], f"{r['images_per_sec']:.1f}", f"{r['jitter']:.1f}",
                  f"{r['iteration_s'] * 1e3:.1f}", f"{r['exposed_s'] * 1e3:.1f}", f"{r['sim_images_per_sec']:.1f}",
                  f"{r['sim_err_pct']:+.1f}%", f"{r['whatif_images_per_sec']:.1f}", f"{r['whatif_err_pct']:+.1f}%",
                  "agree" if r["params_agree"] else "DIFFER")
    return t


def _lines(ax, rows: list[dict], fabric: str, algo: str, color, label: str) -> None:
    mine = sorted((r for r in rows if r["fabric"] == fabric and r["algo"] == algo), key=lambda r: r["workers"])
    if not mine:
        return
    workers = [r["workers"] for r in mine]
    ax.plot(workers, [r["images_per_sec"] for r in mine], marker="o", color=color, label=f"{label} measured")
    ax.plot(workers, [r["sim_images_per_sec"] for r in mine], marker="x", ls="--", color=color,
            label=f"{label} simulator")
    ax.plot(workers, [r["whatif_images_per_sec"] for r in mine], marker=".", ls=":", color=color,
            label=f"{label} what-if")


def plot_figures(rows: list[dict], out_dir: Path, *, model: str) -> list[Path]:
    """fig4.png and fig5.png, named after the figures of Samsi et al. they correspond to: Figure 4
    (images/sec vs workers per fabric, first algorithm) and Figure 5 (one panel per algorithm)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    algos = list(dict.fromkeys(r["algo"] for r in rows))
    workers = sorted({r["workers"] for r in rows})
    colors = {f: plt.get_cmap("tab10")(i) for i, f in enumerate(fabrics)}
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for fabric in fabrics:
        _lines(ax, rows, fabric, algos[0], colors[fabric], FABRIC_LABELS.get(fabric, fabric))
    ax.set(xlabel="workers (GPUs)", ylabel="images/sec", xticks=workers,
           title=f"{model}: 25 GbE vs 100 Gb Omni-Path (all-reduce {algos[0]}), like Samsi et al. Fig. 4")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out_dir / "fig4.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(algos), figsize=(5 * len(algos), 4.5), squeeze=False, sharey=True)
    for ax, algo in zip(axes[0], algos):
        for fabric in fabrics:
            _lines(ax, rows, fabric, algo, colors[fabric], FABRIC_LABELS.get(fabric, fabric))
        ax.set(xlabel="workers (GPUs)", title=f"all-reduce {algo}", xticks=workers)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("images/sec")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{model}: all-reduce strategies on both fabrics, like Samsi et al. Fig. 5")
    fig.tight_layout()
    paths.append(out_dir / "fig5.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_fabrics_outputs(out: Path, config: dict, results: dict, *, model: str) -> None:
    """fabrics.json (the record of `config` and `results`), fabrics.csv (its rows), fig4.png and fig5.png."""
    write_outputs(out, "fabrics", FABRICS_KIND, config, results, results["rows"])
    plot_figures(results["rows"], out, model=model)
