"""`fabriclab whatif reproduce`: the what-if table, compression answer and conclusions of Zhang et al.,
"Is Network the Bottleneck of Distributed Training?" (NetAI'20).

From the V100 logs shipped with fabriclab (the paper's repository): the scaling factor of ResNet50,
ResNet101 and VGG16 at 1-100 Gbps and 16/32/64 workers; the compression ratio each needs at 10 Gbps
for 0.9 and 0.99; the paper's conclusions checked; and how other fusion policies and algorithms change
the answer. Writes `whatif_reproduced.md`, `whatif_reproduced.csv` and plots to `--out`.

Try it: `fabriclab whatif reproduce --out results/whatif`.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_dir,
    user_errors,
)
from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.sweep import (
    PAPER_BANDWIDTHS_GBPS,
    PAPER_COMPRESSION,
    PAPER_WORKERS,
    SweepAxes,
    compression_needed,
    run_sweep,
)
from fabriclab.workload.addcost import builtin_add_cost
from fabriclab.workload.profile import V100_BATCH_S, load_profile

# Zhang et al., NetAI'20 (Figure 1, via ../shared/reference/README.md): Horovod over TCP at 100 Gbps,
# 8 GPUs per server, 2 / 4 / 8 servers = 16 / 32 / 64 GPUs.
MEASURED_HOROVOD_100G = {"resnet50": (0.7505, 0.7424, 0.716), "resnet101": (0.6892, 0.6628, 0.6699),
                         "vgg16": (0.5599, 0.6301, 0.598)}


REPORT_MD = "whatif_reproduced.md"
REPORT_CSV = "whatif_reproduced.csv"


def _f(profile, fusion, model) -> float:
    from fabriclab.whatif.iteration import simulate_iteration

    return simulate_iteration(profile, fusion, model).scaling_factor


def build_report(out: Path) -> tuple[str, list[dict], float]:
    add = builtin_add_cost()
    profiles = {m: load_profile(m) for m in V100_BATCH_S}
    paper = FusionPolicy()

    def cost(**kw):
        kw.pop("algo", None)
        return CostModel(add_cost=add, **kw)
    t0 = time.perf_counter()
    rows = list(run_sweep(SweepAxes(profiles=tuple(profiles.values()), compression=PAPER_COMPRESSION),
                          paper, cost))
    sweep_s = time.perf_counter() - t0
    f = {(r["model"], r["bandwidth_Gbps"], r["workers"], r["compression"]): r["scaling_factor"] for r in rows}
    lines = ["# The what-if of Zhang et al., \"Is Network the Bottleneck of Distributed Training?\" (NetAI'20), "
             "reproduced from the V100 logs", "",
             f"Full sweep (3 models x 5 bandwidths x 3 worker counts x 6 compression ratios = {len(rows)} "
             f"points), fusion 5 ms / 64 MiB, cost 2S(N-1)/N/bw + (N-1) AddEst(S/N): {sweep_s:.3f} s.", "",
             "## Scaling factor, no compression", "",
             "| model | Gbps | " + " | ".join(f"{n} workers" for n in PAPER_WORKERS) + " |",
             "|---|---|" + "---|" * len(PAPER_WORKERS)]
    for m in profiles:
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
    need = {}
    for m, p in profiles.items():
        for n in PAPER_WORKERS:
            base = CostModel(bandwidth_Bps=10e9 / 8, num_workers=n, add_cost=add)
            need[(m, n)] = [compression_needed(p, paper, base, t) for t in (0.9, 0.99)]
            lines.append(f"| {m} | {n} | " + " | ".join(f"{x:.2f}x" if x else "> 1000x" for x in need[(m, n)]) + " |")
    lines += ["", "## The paper's conclusions in our numbers", ""]
    near_100 = min(f[(m, 100, n, 1)] for m in profiles for n in PAPER_WORKERS)
    lines.append(f"- 'Close to 100 % for all three at 100 Gbps up to 64 GPUs': "
                 f"{'holds' if near_100 > 0.99 else 'does not hold'} (lowest {near_100:.4f}).")
    resnets = max(x for (m, n), v in need.items() if m != "vgg16" for x in v[:1])
    lines.append(f"- '2x-5x compression is enough at 10 Gbps' (for f >= 0.9): holds for the ResNets "
                 f"(at most {resnets:.2f}x); VGG16 needs {max(need[('vgg16', n)][0] for n in PAPER_WORKERS):.2f}x, "
                 f"within the paper's '10x is large enough for VGG16'.")
    gain_100 = max(f[(m, 100, n, 10)] - f[(m, 100, n, 1)] for m in profiles for n in PAPER_WORKERS)
    lines.append(f"- 'Compression is not that useful at 100 Gbps': holds; 10x compression adds at most "
                 f"{gain_100:.4f} to the scaling factor there.")
    lines += ["", "## Where the fusion policy or the algorithm changes the answer (64 workers)", "",
              "| model | Gbps | time-or-size | horovod 1 ms | ddp 25 MiB | no overlap | ring, 25 us/msg "
              "| butterfly, 25 us/msg |",
              "|---|---|---|---|---|---|---|---|"]
    table = {}
    for m, p in profiles.items():
        for bw in (10, 25, 100):
            base = dict(bandwidth_Bps=bw * 1e9 / 8, num_workers=64, add_cost=add)
            cells = [_f(p, FusionPolicy(name=name), CostModel(**base))
                     for name in ("time-or-size", "horovod", "ddp", "none")]
            cells += [_f(p, paper, CostModel(kind="closed-form", algo=a, alpha_s=25e-6, **base))
                      for a in ("ring", "butterfly")]
            table[(m, bw)] = cells
            lines.append(f"| {m} | {bw} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")

    def worst(col, bw):
        m = max(profiles, key=lambda k: table[(k, bw)][0] - table[(k, bw)][col])
        return m, table[(m, bw)][0] - table[(m, bw)][col]
    no_overlap, horovod, ring_lat = worst(3, 100), worst(1, 25), worst(4, 100)
    lines += ["", f"- No overlap (one bucket after backward) costs up to {no_overlap[1]:.3f} of scaling factor "
              f"at 100 Gbps ({no_overlap[0]}): overlap, not bandwidth alone, is what makes 100 Gbps enough.",
              f"- Horovod's 1 ms cycle makes many small buckets, and each pays (N-1) = 63 vector adds "
              f"whose fixed cost (about 10 us on the V100 table) dominates small sizes: up to "
              f"{horovod[1]:.3f} lower at 25 Gbps ({horovod[0]}). DDP's larger buckets start later but pay "
              f"that fixed cost less often.",
              f"- A per-message latency of 25 us (TCP-like) costs the ring 2(N-1) = 126 latencies per "
              f"bucket at 64 workers: up to {ring_lat[1]:.3f} lower at 100 Gbps ({ring_lat[0]}); butterfly "
              f"pays 2 log2 N = 12 and stays close to the paper's closed form."]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_MD).write_text(text)
    from fabriclab.record import write_csv
    from fabriclab.report.whatif import plot_whatif

    write_csv(out / REPORT_CSV, rows)
    plot_whatif(rows, out)
    return text, rows, sweep_s


def register(app: typer.Typer) -> None:
    @app.command("reproduce")
    @user_errors
    def reproduce(out: Path = typer.Option(Path("results/whatif"), help="Folder for the report, CSV and plots."),
                  fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
        """Zhang et al.'s (NetAI'20) what-if table, compression answer and conclusions from the V100 logs."""
        output = Output(fmt, json_path, store)
        check_output_dir(out)
        text, rows, sweep_s = build_report(out)
        output.note(text)
        output.note(f"written: {out / REPORT_MD}, {out / REPORT_CSV}, plots in {out}")
        output.record("whatif.reproduce", {"out": str(out)}, {"sweep_s": sweep_s, "rows": rows})
