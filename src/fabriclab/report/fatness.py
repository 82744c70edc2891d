"""Plots and a written verdict for the `fatness` sweep (Zhang, Li, Tanimura, Nakada), from its CSV only.

The poster has four figures (exchange time vs. bisection ratio, one line per method); `plot_figures`
draws the same four from our numbers, and `summary` checks each of the poster's conclusions against
them, saying which our numbers support, which not, and why.

Try it: `fabriclab simulate sweep --preset fatness --out results/fatness`.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from fabriclab.bench.fatness import BISECTIONS, METHODS

# (file name, title, layers, hosts, link GB/s, latency us, methods shown) as on the poster.
FIGURES = (
    ("fig1_2layer_2048_4GBps_0.2us.png", "2-Layered: 2048 nodes 4GBytes/s, 0.2us", 2, 2048, 4, 0.2, METHODS),
    ("fig2_3layer_1024_4GBps_0.2us.png", "3-Layered: 1024 nodes 4GBytes/s, 0.2us", 3, 1024, 4, 0.2, METHODS),
    ("fig3_3layer_1024_1GBps_0.2us.png", "3-Layered: 1024 nodes 1GBytes/s, 0.2us", 3, 1024, 1, 0.2, METHODS),
    ("fig4_3layer_1024_4GBps_0.2us_enlarged.png", "3-Layered: 1024 nodes 4GBytes/s, 0.2us (enlarged)",
     3, 1024, 4, 0.2, ("ring", "butterfly-near", "layered-butterfly")),
)


def _table(rows: list[dict]) -> dict[tuple, float]:
    return {(int(r["layers"]), int(r["hosts"]), r["bisection"], float(r["link_GBps"]),
             float(r["latency_us"]), r["method"]): float(r["time_s"]) for r in rows}


def plot_figures(rows: list[dict], out_dir: Path) -> list[Path]:
    """Draw the poster's four figures; a figure whose points are missing is skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = _table(rows)
    x = [float(Fraction(b)) for b in BISECTIONS]
    written = []
    for name, title, layers, hosts, link, lat, methods in FIGURES:
        if not all((layers, hosts, b, link, lat, m) in t for b in BISECTIONS for m in methods):
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in methods:
            ax.plot(x, [t[(layers, hosts, b, link, lat, m)] for b in BISECTIONS], marker="o", label=m)
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, BISECTIONS)
        ax.set_xlabel("bisection ratio")
        ax.set_ylabel("time to exchange 1 GB (s)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        written.append(out_dir / name)
    return written


def _verdict(ok: bool) -> str:
    return "SUPPORTED" if ok else "NOT SUPPORTED"


def summary(rows: list[dict]) -> str:
    """Check the poster's conclusions against our numbers; each line says the figures it used."""
    t = _table(rows)
    out = ["# Network fatness (Zhang, Li, Tanimura, Nakada): the poster's conclusions against our simulation", ""]

    def get(layers, hosts, b, link, lat, m):
        return t.get((layers, hosts, b, link, lat, m))

    base = (2, 2048)
    bf = [get(*base, b, 4, 0.2, "butterfly-near") for b in BISECTIONS]
    lay = [get(*base, b, 4, 0.2, "layered-butterfly") for b in BISECTIONS]
    ring = [get(*base, b, 4, 0.2, "ring") for b in BISECTIONS]
    if None not in bf + lay + ring:
        ok = bf[-1] > 1.2 * bf[0]
        out.append(f"1. Bisection ratio affects flat butterfly (2-layer, 2048 nodes, 4 GB/s, 0.2 us): "
                   f"{_verdict(ok)}. Flat butterfly takes {bf[0]:.3f} s at ratio 1 and {bf[-1]:.3f} s at "
                   f"1/16 ({bf[-1] / bf[0]:.2f}x): its partners beyond the leaf all cross the thin "
                   f"up-links at once. Ring takes {ring[0]:.3f} s and {ring[-1]:.3f} s: only one flow per "
                   f"leaf leaves it, so ring does not care about bisection at all.")
        ok = abs(lay[-1] / lay[1] - 1) < 0.05
        lay3 = [get(3, 1024, b, 4, 0.2, "layered-butterfly") for b in BISECTIONS]
        three = (f" On the 3-level tree of 1024 nodes it is not flat: {lay3[1]:.3f} s at 1/2 and "
                 f"{lay3[-1]:.3f} s at 1/16, because 16 leaf leaders of a pod share the thinned pod "
                 f"up-links.") if None not in lay3 else ""
        out.append(f"2. Layered butterfly is flat; 1/2 and 1/16 are the same (2-layer, 2048 nodes): "
                   f"{_verdict(ok)}. {lay[1]:.3f} s at 1/2, {lay[-1]:.3f} s at 1/16: only one leader per "
                   f"leaf talks across, and one flow fits in one up-link at every ratio.{three}")
    ps_slowest, total, beaten_by = 0, 0, {}
    for (layers, hosts, b, link, lat, m), v in t.items():
        if m != "parameter-server":
            continue
        others = {o: t.get((layers, hosts, b, link, lat, o)) for o in METHODS if o != m}
        if None in others.values():
            continue
        total += 1
        worst = max(others, key=others.get)
        if v >= others[worst] * (1 - 1e-9):
            ps_slowest += 1
        else:
            beaten_by[worst] = beaten_by.get(worst, 0) + 1
    if total:
        exceptions = ", ".join(f"{m} is slower in {n}" for m, n in sorted(beaten_by.items()))
        verdict = "SUPPORTED" if ps_slowest == total else (
            "MOSTLY SUPPORTED" if ps_slowest >= 0.8 * total else "NOT SUPPORTED")
        out.append(f"3. Avoid the parameter server (P/8 servers): {verdict}. It is the slowest (or tied) in "
                   f"{ps_slowest} of {total} configurations" + (f"; {exceptions}" if exceptions else "") +
                   ". Each server's link carries (P-1)/(P/8), about 8x its shard, in and out, against 2x "
                   "for ring or butterfly; only far-first butterfly on a thin tree, which sends half the "
                   "buffer across the up-links first, can be as bad.")
    ratios = []
    for b in BISECTIONS:
        for m in METHODS:
            slow, fast = get(3, 1024, b, 1, 0.2, m), get(3, 1024, b, 4, 0.2, m)
            if slow and fast:
                ratios.append(slow / fast)
    if ratios:
        ok = all(3.8 < r < 4.05 for r in ratios)
        out.append(f"4. Link speed linearly affects the exchange (3-layer, 1024 nodes): {_verdict(ok)}. "
                   f"1 GB/s over 4 GB/s gives {min(ratios):.3f}x to {max(ratios):.3f}x (4x would be "
                   f"exactly linear; latency terms keep it just below).")
    per_method = {}
    for b in BISECTIONS:
        for m in METHODS:
            two, three = get(2, 2048, b, 4, 0.2, m), get(3, 1024, b, 4, 0.2, m)
            if two and three:
                r = max(three / two, two / three)
                if r > per_method.get(m, (0.0, ""))[0]:
                    per_method[m] = (r, b)
    if per_method:
        listed = "; ".join(f"{m} up to {r:.2f}x (ratio {b})" for m, (r, b) in per_method.items())
        ok = max(r for r, _ in per_method.values()) < 1.25
        out.append(f"5. 2 vs 3 layers does not matter much (2048 nodes on 2 layers vs 1024 on 3, 4 GB/s): "
                   f"{_verdict(ok) if ok else 'ONLY AT FULL BISECTION'}. Largest gap per method: {listed}. "
                   f"At ratio 1 all agree within latency terms; below it the trees differ where the ratio "
                   f"bites: our 3-level tree keeps its leaves full and thins the pod up-links, so traffic "
                   f"that stays in a pod (near-first butterfly's first 8 rounds) is spared, and traffic "
                   f"across pods (parameter server, layered butterfly's leaders: 16 per pod) is squeezed.")
    full = {m: get(3, 1024, "1", 4, 0.2, m) for m in METHODS}
    if None not in full.values():
        best = min(full, key=full.get)
        ok = full["butterfly-near"] <= min(full.values()) * 1.001
        out.append(f"6. With full bisection flat butterfly is the best (3-layer, 1024 nodes, 4 GB/s): "
                   f"{_verdict(ok)}. Times: " + ", ".join(f"{m} {v:.4f} s" for m, v in full.items()) +
                   f". Fastest: {best}. Ring and flat butterfly both move 2(P-1)/P of the data per "
                   f"link; butterfly needs 2 log2 P latency steps against ring's 2(P-1), so at 1 GB the "
                   f"two are within the latency terms of each other, while layered butterfly sends "
                   f"whole buffers up and down its groups and is clearly slower.")
    out.append("")
    out.append("All numbers: one rank per host, linear placement, D-mod-K routing, max-min fair flow-level "
               "simulation without a TCP model; `exact` in the CSV says where a shortcut was proven equal "
               "to the general engine.")
    return "\n".join(out) + "\n"
