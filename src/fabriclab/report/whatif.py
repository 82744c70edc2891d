"""Plots of what-if rows like Figures 6-8 of Zhang et al., "Is Network the Bottleneck of Distributed
Training?" (NetAI'20), and the report of their what-if reproduced (`whatif.reproduce`).

Figure 6: scaling factor vs. bandwidth per model; Figure 7: vs. workers at the highest bandwidth;
Figure 8: vs. compression ratio at 10 Gbps (and at the highest bandwidth). `write_reproduction` writes
the reproduced what-if as Markdown (`REPORT_MD`), its sweep as CSV (`REPORT_CSV`) and the figures.

Try it: `fabriclab whatif reproduce --out results/whatif`.
"""

from __future__ import annotations

from pathlib import Path

from fabriclab.record import write_csv
from fabriclab.whatif.reproduce import MEASURED_HOROVOD_100G, Reproduction
from fabriclab.whatif.sweep import PAPER_BANDWIDTHS_GBPS, PAPER_WORKERS

REPORT_MD = "whatif_reproduced.md"
REPORT_CSV = "whatif_reproduced.csv"


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


def write_reproduction(out: Path, rep: Reproduction) -> str:
    """Write `REPORT_MD`, `REPORT_CSV` and the figures into `out` (created if missing); returns the Markdown."""
    text = reproduction_markdown(rep)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_MD).write_text(text)
    write_csv(out / REPORT_CSV, rep.rows)
    plot_whatif(rep.rows, out)
    return text


def reproduction_markdown(rep: Reproduction) -> str:
    """The reproduced what-if: scaling table, measured vs. what-if, compression answer, conclusions."""
    f = rep.scaling
    lines = ["# The what-if of Zhang et al., \"Is Network the Bottleneck of Distributed Training?\" (NetAI'20), "
             "reproduced from the V100 logs", "",
             f"Full sweep (3 models x 5 bandwidths x 3 worker counts x 6 compression ratios = {len(rep.rows)} "
             f"points), fusion 5 ms / 64 MiB, cost 2S(N-1)/N/bw + (N-1) AddEst(S/N): {rep.sweep_s:.3f} s.", "",
             "## Scaling factor, no compression", "",
             "| model | Gbps | " + " | ".join(f"{n} workers" for n in PAPER_WORKERS) + " |",
             "|---|---|" + "---|" * len(PAPER_WORKERS)]
    for m in rep.models:
        for bw in PAPER_BANDWIDTHS_GBPS:
            lines.append(f"| {m} | {bw} | " + " | ".join(f"{f[(m, bw, n, 1)]:.4f}" for n in PAPER_WORKERS) + " |")
    lines += ["", "Measured by Zhang et al. with Horovod over TCP at 100 Gbps (16/32/64 GPUs) against our what-if:",
              "",
              "| model | measured | what-if |", "|---|---|---|"]
    for m, meas in MEASURED_HOROVOD_100G.items():
        lines.append(f"| {m} | {' / '.join(f'{x:.3f}' for x in meas)} | "
                     f"{' / '.join(f'{f[(m, 100, n, 1)]:.3f}' for n in PAPER_WORKERS)} |")
    lines += ["", "## Compression needed at 10 Gbps", "", "| model | workers | f >= 0.9 | f >= 0.99 |",
              "|---|---|---|---|"]
    for (m, n), need in rep.compression.items():
        lines.append(f"| {m} | {n} | " + " | ".join(f"{x:.2f}x" if x else "> 1000x" for x in need) + " |")
    return "\n".join(lines + _conclusions(rep) + _policy_lines(rep)) + "\n"


def _conclusions(rep: Reproduction) -> list[str]:
    near_100 = rep.lowest_at_100()
    return ["", "## The paper's conclusions in our numbers", "",
            f"- 'Close to 100 % for all three at 100 Gbps up to 64 GPUs': "
            f"{'holds' if near_100 > 0.99 else 'does not hold'} (lowest {near_100:.4f}).",
            f"- '2x-5x compression is enough at 10 Gbps' (for f >= 0.9): holds for the ResNets "
            f"(at most {rep.resnets_need():.2f}x); VGG16 needs {rep.vgg16_needs():.2f}x, "
            f"within the paper's '10x is large enough for VGG16'.",
            f"- 'Compression is not that useful at 100 Gbps': holds; 10x compression adds at most "
            f"{rep.gain_at_100():.4f} to the scaling factor there."]


def _policy_lines(rep: Reproduction) -> list[str]:
    lines = ["", "## Where the fusion policy or the algorithm changes the answer (64 workers)", "",
             "| model | Gbps | time-or-size | horovod 1 ms | ddp 25 MiB | no overlap | ring, 25 us/msg "
             "| butterfly, 25 us/msg |",
             "|---|---|---|---|---|---|---|---|"]
    for (m, bw), cells in rep.policies.items():
        lines.append(f"| {m} | {bw} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    no_overlap, horovod, ring_lat = rep.worst_loss(3, 100), rep.worst_loss(1, 25), rep.worst_loss(4, 100)
    return lines + [
        "", f"- No overlap (one bucket after backward) costs up to {no_overlap[1]:.3f} of scaling factor "
        f"at 100 Gbps ({no_overlap[0]}): overlap, not bandwidth alone, is what makes 100 Gbps enough.",
        f"- Horovod's 1 ms cycle makes many small buckets, and each pays (N-1) = 63 vector adds "
        f"whose fixed cost (about 10 us on the V100 table) dominates small sizes: up to "
        f"{horovod[1]:.3f} lower at 25 Gbps ({horovod[0]}). DDP's larger buckets start later but pay "
        f"that fixed cost less often.",
        f"- A per-message latency of 25 us (TCP-like) costs the ring 2(N-1) = 126 latencies per "
        f"bucket at 64 workers: up to {ring_lat[1]:.3f} lower at 100 Gbps ({ring_lat[0]}); butterfly "
        f"pays 2 log2 N = 12 and stays close to the paper's closed form."]
