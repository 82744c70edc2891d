"""Plot of a network plan: scaling factor against network cost, one figure per model.

Colours are GPU counts, markers fabrics; the line joins each GPU count's Pareto frontier and the
dashed line is the target scaling factor.

Try it: `fabriclab plan --model resnet50 --gpus 64,256,512 --fabrics 25gbe,100gbe --out results/plan`.
"""

from __future__ import annotations

import re
from pathlib import Path

MARKERS = "osD^v<>Pp*hX"


def plot_plan(rows: list[dict], out_dir: Path, *, target: float | None = None,
              price_label: str = "") -> list[Path]:
    """Write `plan-<model>.png` per model into `out_dir`; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    gpus = sorted({r["gpus"] for r in rows})
    colours = plt.get_cmap("viridis")([i / max(1, len(gpus) - 1) * 0.85 for i in range(len(gpus))])
    prices = f"{price_label} prices" if price_label else "prices"
    written = []
    for model in dict.fromkeys(r["model"] for r in rows):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        mine = [r for r in rows if r["model"] == model]
        for colour, n in zip(colours, gpus):
            at = [r for r in mine if r["gpus"] == n]
            for marker, fabric in zip(MARKERS * 3, fabrics):
                pts = [r for r in at if r["fabric"] == fabric]
                ax.scatter([r["network_usd"] for r in pts], [r["scaling_factor"] for r in pts],
                           color=colour, marker=marker, s=28, alpha=0.8)
            front = sorted((r for r in at if r.get("pareto")), key=lambda r: r["network_usd"])
            ax.plot([r["network_usd"] for r in front], [r["scaling_factor"] for r in front],
                    color=colour, lw=1.2, label=f"{n} GPUs (Pareto frontier)")
        for marker, fabric in zip(MARKERS * 3, fabrics):
            ax.scatter([], [], color="grey", marker=marker, label=fabric)
        if target is not None:
            ax.axhline(target, color="black", ls="--", lw=0.8, label=f"target {target:.2f}")
        ax.set(xscale="log", xlabel=f"network cost (USD, {prices})", ylabel="scaling factor (1 = linear)",
               title=f"{model}: scaling factor vs. network cost")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        path = out_dir / f"plan-{re.sub(r'[^A-Za-z0-9_.-]+', '_', model)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
