"""Plots of what-if rows like Figures 6-8 of Zhang et al., "Is Network the Bottleneck of Distributed
Training?" (NetAI'20).

Figure 6: scaling factor vs. bandwidth per model; Figure 7: vs. workers at the highest bandwidth;
Figure 8: vs. compression ratio at 10 Gbps (and at the highest bandwidth).

Try it: `fabriclab whatif reproduce --out results/whatif`.
"""

from __future__ import annotations

from pathlib import Path


def plot_whatif(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    models = sorted({r["model"] for r in rows})
    workers = sorted({r["workers"] for r in rows})
    bws = sorted({r["bandwidth_Gbps"] for r in rows})
    comps = sorted({r["compression"] for r in rows})
    algo = rows[0]["algo"] if rows else "ring"
    f = {(r["model"], r["workers"], r["bandwidth_Gbps"], r["compression"]): r["scaling_factor"]
         for r in rows if r["algo"] == algo}
    written = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        written.append(out_dir / name)

    n = max(workers)
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in models:
        ax.plot(bws, [f.get((m, n, b, 1.0), float("nan")) for b in bws], marker="o", label=m)
    ax.set(xscale="log", xlabel="bandwidth (Gbps)", ylabel="scaling factor", ylim=(0, 1.05),
           title=f"Scaling factor vs bandwidth, {n} workers (cf. Zhang et al. Fig. 6)")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, "fig6_scaling_vs_bandwidth.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in models:
        ax.plot(workers, [f.get((m, w, bws[-1], 1.0), float("nan")) for w in workers], marker="o", label=m)
    ax.set(xlabel="workers", ylabel="scaling factor", ylim=(0, 1.05),
           title=f"Scaling factor vs workers at {bws[-1]:g} Gbps (cf. Zhang et al. Fig. 7)")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, "fig7_scaling_vs_workers.png")
    if len(comps) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        for b in sorted({10.0, bws[-1]} & set(bws)):
            for m in models:
                ax.plot(comps, [f.get((m, n, b, c), float("nan")) for c in comps], marker="o",
                        label=f"{m} {b:g} Gbps", linestyle="-" if b == 10 else "--")
        ax.set(xscale="log", xlabel="compression ratio", ylabel="scaling factor", ylim=(0, 1.05),
               title=f"Scaling factor vs compression, {n} workers (cf. Zhang et al. Fig. 8)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        save(fig, "fig8_scaling_vs_compression.png")
    return written
