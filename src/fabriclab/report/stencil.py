"""Tables and Samsi et al.'s Figure 3 for the stencil: compute vs. communication time per step vs. ranks.

Figure 3 of Samsi et al. ("Benchmarking network fabrics for data distributed training of deep neural
networks", TX-GAIA) plots, for CartDG on 25 GbE and on 100 Gb Omni-Path, the compute and the
communication time against the number of cores (strong scaling, log-log). `plot_figure3` draws the same
from the rows of `bench.stencil_sim.simulate_at_scale` (or of the emulated sweep, `bench.stencil_scale`):
one compute line, one communication line per fabric, and the rack boundary where it is crossed.

Try it: `fabriclab stencil simulate --ranks 64,256,1024,4096 --out results/stencil`.
"""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.table import Table

FABRIC_LABELS = {"25gbe": "25 GbE", "100g-opa": "100 Gb Omni-Path"}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


SCALE_TITLE = "stencil strong scaling on emulated fabrics (times per step, emulation's own time)"
SCALE_COLUMNS = ("fabric", "ranks", "grid", "link rate", "compute(ms)", "compute CPU(ms)", "comm(ms)",
                 "comm max(ms)", "sim comm(ms)", "comm share")


def scale_cells(r: dict) -> list[str]:
    """One row of the emulated sweep, as the cells of `SCALE_COLUMNS`."""
    share = r["comm_s"] / (r["comm_s"] + r["compute_s"]) if r["comm_s"] + r["compute_s"] else 0.0
    return [r["fabric"], str(r["num_ranks"]), "x".join(map(str, r["procs"])),
            f"{r['emulated_rate_Bps'] * 8 / 1e6:.4g} Mbit/s", _ms(r["compute_s"]), _ms(r["compute_cpu_s"]),
            _ms(r["comm_s"]), _ms(r["comm_max_s"]), _ms(r["sim_comm_s"]), f"{share:.0%}"]


def scale_table(rows: list[dict]) -> Table:
    """The emulated sweep: per fabric and rank count, measured compute / comm vs. simulated comm."""
    t = Table(title=SCALE_TITLE, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for h in SCALE_COLUMNS:
        t.add_column(h, justify="left" if h == "fabric" else "right", no_wrap=True)
    for r in rows:
        t.add_row(*scale_cells(r))
    return t


def at_scale_table(rows: list[dict]) -> Table:
    """The simulated sweep: per fabric and rank count, compute, comm, step, speed-up, efficiency."""
    t = Table(title="stencil strong scaling, simulated (times per step)", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False)
    for h in ("fabric", "ranks", "grid", "racks", "face(B)", "compute(ms)", "comm(ms)", "step(ms)", "speed-up",
              "efficiency"):
        t.add_column(h, justify="left" if h == "fabric" else "right", no_wrap=True)
    for r in rows:
        t.add_row(r["fabric"], str(r["num_ranks"]), "x".join(map(str, r["procs"])), str(r["racks"]),
                  "/".join(map(str, r["face_bytes"])), _ms(r["compute_s"]), _ms(r["comm_s"]), _ms(r["step_s"]),
                  f"{r['speedup']:.4g}", f"{r['efficiency']:.1%}")
    return t


def plot_figure3(rows: list[dict], path: Path, *, title: str, rack_ranks: int | None = None,
                 measured: bool = False) -> Path:
    """Compute and communication time per step vs. ranks (log-log), one comm line per fabric, like Samsi
    et al.'s Figure 3. `measured` rows (the emulated sweep) add the CPU-time compute and the simulated comm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    first = [r for r in rows if r["fabric"] == fabrics[0]]
    ranks = [r["num_ranks"] for r in first]
    ax.plot(ranks, [r["compute_s"] for r in first], marker="o", color="black",
            label=f"compute (wall, {FABRIC_LABELS.get(fabrics[0], fabrics[0])} runs)" if measured else "compute")
    if measured:
        ax.plot(ranks, [r["compute_cpu_s"] for r in first], marker=".", color="grey", ls="--",
                label="compute (CPU time)")
    for i, fabric in enumerate(fabrics):
        mine = [r for r in rows if r["fabric"] == fabric and r["num_ranks"] > 1]
        color = plt.get_cmap("tab10")(i)
        label = FABRIC_LABELS.get(fabric, fabric)
        ax.plot([r["num_ranks"] for r in mine], [r["comm_s"] for r in mine], marker="s", color=color,
                label=f"communication, {label}" + (" (measured)" if measured else ""))
        if measured:
            ax.plot([r["num_ranks"] for r in mine], [r["sim_comm_s"] for r in mine], marker="x", ls=":",
                    color=color, label=f"communication, {label} (simulated)")
    if rack_ranks is not None and min(ranks) < rack_ranks <= max(ranks):
        ax.axvline(rack_ranks, color="grey", lw=0.8, ls=":")
        ax.text(rack_ranks, ax.get_ylim()[1], " one rack", va="top", fontsize=8, color="grey")
    ax.set(xscale="log", yscale="log", xlabel="ranks (cores)", ylabel="time per step (s)", title=title)
    ax.set_xticks(ranks, [str(n) for n in ranks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never hides a point
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
