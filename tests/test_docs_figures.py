"""The figures of the README's quick start and of the docs pages, re-computed by the commands that print them.

Each check runs the command a page names (in this process, through the CLI, with `--json`), formats the value
as the page prints it and looks for it where the page prints it: a change to a model that moves a figure fails
here until the page says the new figure. The quick start's commands are read from the README itself, so they
also keep working as written. Figures measured on noisy hardware are not here: their pages say which run they
come from (date, commit, command).
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriclab.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
A100_LOGS = ROOT / "examples" / "nccl-tests-a100"


def results(tmp_path: Path, args: list[str]) -> dict | list:
    """The `results` of the record the command writes; the command must succeed."""
    out = tmp_path / f"record-{len(list(tmp_path.iterdir()))}.json"
    done = CliRunner().invoke(app, [*args, "--json", str(out)], env={"COLUMNS": "80", "FABRICLAB_STORE": "off"})
    assert done.exit_code == 0, f"fabriclab {' '.join(args)}:\n{done.output[-2000:]}"
    return json.loads(out.read_text())["results"]


def section(text: str, heading: str) -> str:
    """From the heading to the next heading of the same or a higher level."""
    level = len(heading.split(" ")[0])
    lines = text[text.index(heading):].splitlines(keepends=True)
    fenced, out = False, [lines[0]]
    for line in lines[1:]:
        fenced ^= line.startswith("```")
        if not fenced and re.match(rf"#{{1,{level}}} ", line):
            break
        out.append(line)
    return "".join(out)


def table_row(text: str, first_cell: str) -> list[str]:
    """The cells of the markdown table row whose first cell is `first_cell`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row {first_cell!r}")


def flat(text: str) -> str:
    """Prose with its line breaks as spaces, so a figure may wrap."""
    return re.sub(r"\s+", " ", text)


def seconds(value: float) -> str:
    return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"


def step_s(result: dict) -> float:
    """The step a command reports: the median over draws where it drew, else its one step."""
    return result.get("step_time_s_median", result["step_time_s"])


# --- README: the quick start ---------------------------------------------------------------------------------


def quick_start() -> tuple[str, list[list[str]]]:
    """The quick start's text and its commands (continuation lines joined, `fabriclab` dropped)."""
    text = section((ROOT / "README.md").read_text(), "## Quick start")
    block = text.split("```")[1]
    commands, line = [], ""
    for raw in block.splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        line += raw.rstrip().removesuffix("\\")
        if not raw.rstrip().endswith("\\"):
            argv = shlex.split(line, comments=True)
            assert argv[0] == "fabriclab", argv
            commands.append(argv[1:])
            line = ""
    return text, commands


def test_quick_start_is_three_commands_and_the_report():
    _, commands = quick_start()
    assert [c[0] for c in commands] == ["plan", "plan", "whatif", "report"]


def test_quick_start_which_cluster_and_network(tmp_path):
    text, commands = quick_start()
    rows = {r["option"]: r for r in results(tmp_path, commands[0])["rows"]}
    h100, h100_quarter = rows["dgx-h100 fat-tree 400G"], rows["dgx-h100 fat-tree 400G 1/4"]
    b200 = rows["hgx-b200 rail 800G 1/4"]
    prose = flat(text)
    (layout,) = {r["parallel"] for o, r in rows.items() if o.startswith("dgx-h100")}
    assert f"({layout.rsplit(' mbs', 1)[0]})" in prose
    assert f"{h100['tokens_per_s']:,.0f} tokens/s" in prose
    split = h100["split_s"]
    exposed = sum(v for k, v in split.items() if k != "compute") / h100["step_time_s"]
    assert f"exposed is {100 * exposed:.1f} %" in prose
    assert f"costs ${h100_quarter['network_usd'] / 1e6:.1f} M instead of ${h100['network_usd'] / 1e6:.1f} M" in prose
    assert f"(${h100_quarter['cluster_usd'] / h100_quarter['tokens_per_s']:.1f})" in prose
    assert f"{b200['tokens_per_s']:,.0f} tokens/s at ${b200['cluster_usd'] / b200['tokens_per_s']:.1f} per" in prose


def test_quick_start_the_fabric_as_it_runs(tmp_path):
    text, commands = quick_start()
    rows = {r["option"]: r for r in results(tmp_path, commands[1])["rows"]}
    prose = flat(text)
    full, quarter = rows["roce-h100 fat-tree 400G ecmp"], rows["roce-h100 fat-tree 400G 1/4 ecmp"]
    assert (f"ECMP and DCQCN give {full['tokens_per_s']:,.0f} tokens/s at full bisection and "
            f"{quarter['tokens_per_s']:,.0f} at 1/4") in prose
    adaptive = {round(r["tokens_per_s"]) for o, r in rows.items() if o.endswith("adaptive")}
    assert len(adaptive) == 1 and f"both stay at {adaptive.pop():,}" in prose


def test_quick_start_one_layout(tmp_path):
    text, commands = quick_start()
    r = results(tmp_path, commands[2])
    assert f"step is {r['step_time_s_median']:.3f} s at the median of 4 draws (p90 {r['step_time_s_p90']:.3f} s)" \
        in flat(text)


# --- docs/fabric-as-it-runs.md ------------------------------------------------------------------------------

FABRIC = DOCS / "fabric-as-it-runs.md"
# The table's rows in order: the label's start and the job's options (`--gpus 1024 --seeds 4` on every cell).
FABRIC_ROWS = (
    ("DeepSeek-V3", "--model deepseek-v3 --cluster roce-h100 --tp 1 --pp 8 --ep 64 --recompute full"),
    ("the same on `ib-h100-ar", "--model deepseek-v3 --cluster ib-h100-ar --fabric fat-tree --tp 1 --pp 8 --ep 64"
                                " --recompute full"),
    ("Llama 3 70B", "--model llama3-70b --cluster roce-h100 --tp 2 --cp 2 --zero 3 --seq 8192 --gbs 2048"),
    ("the same on `ib-h100-ar", "--model llama3-70b --cluster ib-h100-ar --fabric fat-tree --tp 2 --cp 2 --zero 3"
                                " --seq 8192 --gbs 2048"),
)
FABRIC_COLUMNS = ("", "--bisection 1/4", "--placement scattered --busy 0.5")


@pytest.mark.parametrize("index", range(len(FABRIC_ROWS)))
def test_fabric_table(index, tmp_path):
    table = [line for line in FABRIC.read_text().splitlines() if line.startswith("| ")]
    header = next(i for i, line in enumerate(table) if line.startswith("| `whatif llm ... --gpus 1024`"))
    cells = [c.strip() for c in table[header + 1 + index].strip("|").split("|")]
    start, args = FABRIC_ROWS[index]
    assert cells[0].startswith(start), cells
    for column, extra in enumerate(FABRIC_COLUMNS, start=1):
        r = results(tmp_path, ["whatif", "llm", *args.split(), *extra.split(), "--gpus", "1024", "--seeds", "4"])
        assert cells[column] == seconds(step_s(r)), (cells[0], extra, cells)


def test_jobs_sharing_a_fabric(tmp_path):
    jobs = results(tmp_path, ["simulate", "jobs", "--cluster", "roce-h100", "--placement", "interleaved",
                              "--job", "allreduce:64:256MiB", "--job", "allreduce:64:256MiB", "--seeds", "16"])
    prose = flat(FABRIC.read_text())
    one = jobs[0]
    assert (f"{one['together_s_median'] * 1e3:.2f} ms together against {one['alone_s_median'] * 1e3:.2f} ms alone"
            f" on the same servers (x{one['slowdown_median']:.2f} median,"
            f" x{max(j['slowdown_p90'] for j in jobs):.2f} p90)") in prose


def test_simai_held_out_table(tmp_path):
    r = results(tmp_path, ["bench", "simai", "--measured",
                           str(DOCS / "measurements" / "simai" / "heldout-64gpu.json")])
    text = FABRIC.read_text()
    names = {"allreduce": "all-reduce", "allgather": "all-gather", "alltoall": "all-to-all"}
    checked = 0
    for case in r["cases"]:
        c = case["case"]
        label = f"{'plain' if c['fabric'] == 'fat-tree' else 'rail'}, {names[c['collective']]} " \
                f"{c['size_bytes'] >> 20} MiB"
        try:
            cells = table_row(text, label)
        except AssertionError:
            continue  # the table shows a selection of the 36 cases
        column = {1: 1, 2: 2, 4: 3}[c["oversubscription"]]
        assert cells[column] == f"{case['ns3']['median_s'] * 1e6:.0f} / {case['fabriclab']['time_s'] * 1e6:.0f}", \
            (label, c["oversubscription"], cells)
        checked += 1
    assert checked == 18
    errors = [abs(case["ratio"] - 1) for case in r["cases"]]
    assert (f"all 36 cases: median |error| {100 * statistics.median(errors):.1f} %, "
            f"worst {100 * max(errors):.1f} %") in flat(text)


# --- docs/benchmarks.md ---------------------------------------------------------------------------------------

BENCH = DOCS / "benchmarks.md"
SIMGRID = {
    "ring, 2048 hosts": ("ring", 2),
    "butterfly (near first), 2048 hosts": ("butterfly", 2),
    "butterfly (far first), 2048 hosts": ("butterfly:order=far", 2),
    "recursive doubling, 2048 hosts": ("recursive-doubling", 2),
    "ring, 3-level, 2048 hosts": ("ring", 3),
}


@pytest.mark.parametrize("label", list(SIMGRID))
def test_simgrid_table_simulated_column(label, tmp_path):
    algo, levels = SIMGRID[label]
    r = results(tmp_path, ["simulate", "collective", "--algo", algo, "--topology", "fat-tree", "--hosts", "2048",
                           "--levels", str(levels), "--bisection", "1/4", "--link", "4GB/s", "--latency", "0.2us",
                           "--size", "1GB"])
    assert table_row(BENCH.read_text(), label)[6] == f"{r['time_s']:.9f} s"


# The rows' ARGS (the first row: the defaults, llama3-8b on 16 GPUs, TP2 PP2).
ASTRA = ("", "--vp 2", "--cp 2", "--gpus 32 --cp 2 --vp 2 --gbs 32", "--zero 0 --recompute full", "--zero 3",
         "--gpus 32 --pp 1 --zero 3", "--gpus 32 --pp 1 --zero 3 --shard-group 8",
         "--model mixtral-8x7b --gpus 32 --ep 4 --gbs 32 --seq 4096",
         "--model mixtral-8x7b --gpus 32 --ep 8 --recompute full", "--model llama3-70b --gpus 64 --tp 8 --pp 4 --vp 2",
         "--model llama3-70b --gpus 64 --tp 4 --pp 1 --zero 3 --recompute full")


def test_astra_sim_table_fabriclab_column(tmp_path):
    """`bench astra-sim ARGS`'s fabriclab step is `whatif llm`'s on the bench's defaults (the ASTRA-sim columns
    need its binary and say which run they come from)."""
    text = section(BENCH.read_text(), "## ASTRA-sim beside the LLM step")
    for args in ASTRA:
        label = f"`{args}`" if args else "(default) llama3-8b, 16 GPUs, TP2 PP2"
        r = results(tmp_path, ["whatif", "llm", "--cluster", "dgx-h100", "--model", "llama3-8b", "--gpus", "16",
                               "--tp", "2", "--pp", "2", *args.split()])
        assert table_row(text, label)[1] == seconds(r["step_time_s"]), label


# --- docs/llm.md ----------------------------------------------------------------------------------------------

LLM = DOCS / "llm.md"


def test_what_an_nvlink_domain_buys(tmp_path):
    prose = flat(LLM.read_text())
    r = results(tmp_path, ["whatif", "llm", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", "4608",
                           "--domain-gpus", "64", "--tp", "1", "--pp", "8", "--ep", "64", "--gbs", "9216",
                           "--seq", "4096", "--recompute", "full"])
    worth = r["domain_worth"]
    assert f"{r['step_time_s']:.3f} s against {worth['step_time_s']:.2f} s (+{100 * worth['gain']:.0f} %" in prose
    r = results(tmp_path, ["whatif", "llm", "--model", "llama3-405b", "--cluster", "gb200-nvl72", "--gpus", "4608",
                           "--tp", "8", "--pp", "8"])
    worth = r["domain_worth"]
    assert f"{r['step_time_s']:.3f} s against {worth['step_time_s']:.3f} s, +{100 * worth['gain']:.1f} %" in prose


def test_the_405b_step_and_a_gb200_all_reduce(tmp_path):
    prose = flat(LLM.read_text())
    r = results(tmp_path, ["whatif", "llm", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384",
                           "--tp", "8", "--pp", "16", "--gbs", "2048", "--seq", "8192", "--recompute", "full"])
    assert f"The step is {r['step_time_s']:.1f} s" in prose
    row = results(tmp_path, ["simulate", "collective", "--cluster", "gb200-nvl72", "--gpus", "8", "--sizes", "1GB"])[0]
    assert (f"NVLS at {row['busbw_GBps']:,.0f} GB/s busbw predicted (range {row['busbw_low_GBps']:.1f}-"
            f"{row['busbw_high_GBps']:,.1f})") in prose and row["algorithm"].startswith("nvls")


# --- docs/plan.md ---------------------------------------------------------------------------------------------


def test_plan_worked_example(tmp_path):
    r = results(tmp_path, ["plan", "--model", "resnet50", "--gpus", "64,256,512", "--fabrics",
                           "25gbe,100g-opa,100gbe,200g-hdr,400g-ndr", "--bisection", "1,1/2,1/4", "--target", "0.9"])
    prose = flat((DOCS / "plan.md").read_text())
    said = [re.search(r"\(scaling ([0-9.]+), [0-9,]+ images/s, network (\$[0-9,]+)\)", flat(line)).groups()
            for line in (rec["text"] for rec in r["recommendations"])]
    assert len(said) == 3
    assert f"for 64 GPUs (scaling {said[0][0]}, {said[0][1]})" in prose
    assert f"for 256 ({said[1][0]}, {said[1][1]})" in prose
    assert f"and 512 GPUs ({said[2][0]}, {said[2][1]})" in prose


# --- docs/calibrate-nccl.md -----------------------------------------------------------------------------------

CALIBRATE = DOCS / "calibrate-nccl.md"


@pytest.mark.parametrize("label, fit, check", [
    ("2 and 4 GPUs", ["nccl_2.log", "nccl_4.log"], "nccl_8.log"),
    ("1-8 GPUs only", ["nccl_1.log", "nccl_2.log", "nccl_4.log", "nccl_8.log"], "nccl_16.log"),
])
def test_a100_calibration_table(label, fit, check, tmp_path):
    r = results(tmp_path, ["calibrate", "nccl-tests", *(str(A100_LOGS / f) for f in fit), "--check",
                           str(A100_LOGS / check), "--out", str(tmp_path / "a.json")])
    cells = table_row(CALIBRATE.read_text(), label)
    bands = {b["band"]: b["max_abs_error_pct"] for b in r["held_out_rows"]}
    assert cells[2:5] == [f"{bands[b]:.1f} %" for b in ("64-512 KB", "1-16 MB", ">= 64 MB")], cells
    coverage = r["held_out_coverage"][0]
    assert cells[5] == f"{coverage['inside']} of {coverage['rows']}", cells


def test_a100_fit_predicts_128_gpus(tmp_path):
    cluster = tmp_path / "a100.json"
    results(tmp_path, ["calibrate", "nccl-tests", *(str(A100_LOGS / f"nccl_{n}.log") for n in (1, 2, 4, 8, 16)),
                       "--out", str(cluster)])
    rows = {row["size_bytes"]: row for row in results(tmp_path, ["simulate", "collective", "--cluster", str(cluster),
                                                                 "--gpus", "128", "--sizes", "32KB,1MB"])}
    prose = flat(CALIBRATE.read_text())
    mb, kb = rows[1 << 20], rows[32 << 10]
    assert (f"1 MB predicts {mb['busbw_GBps']:.2f} GB/s, range {mb['busbw_low_GBps']:.2f}-"
            f"{mb['busbw_high_GBps']:.2f}") in prose
    assert f"32 KB {kb['busbw_GBps']:.2f} GB/s, range {kb['busbw_low_GBps']:.2f}-{kb['busbw_high_GBps']:.2f}" in prose


# --- docs/corpus.md and docs/published.md ---------------------------------------------------------------------


def test_corpus_table(tmp_path):
    r = results(tmp_path, ["validate", "nccl-tests"])
    text = (DOCS / "corpus.md").read_text()

    def cell(b: dict) -> str:
        share = 100 * b["inside"] / b["ranged"]
        return f"{b['median_abs_error_pct']:.1f} %, {b['inside']}/{b['ranged']} ({share:.0f} %)"

    for band in ("64-512 KB", "1-16 MB", ">= 64 MB"):
        by = {b["cluster"]: b for b in r["bands"] if b["band"] == band and b["model"] == "mechanisms"}
        cells = table_row(text, band)
        healthy = by["all"]
        assert cells[1:4] == [cell(by["all+degraded"]), cell(healthy),
                              f"{healthy['clusters_median_within_goal']} of {healthy['clusters']}"], (band, cells)


def test_published_rows(tmp_path):
    rows = {row["key"]: row for row in results(tmp_path, ["validate", "published", "--no-details", "--rows",
                                                          "zhang-,samsi-,awan-,horovod-"])["rows"]}
    prose = flat((DOCS / "published.md").read_text())
    after = [row for row in rows.values() if row["mechanisms"] is not None]
    before = [row for row in rows.values() if row["baseline"] is not None]
    assert (f"{sum(r['mechanisms_within_goal'] for r in after)} of {len(after)} rows are within 10 %" in prose
            and f"against {sum(r['baseline_within_goal'] for r in before)} of {len(before)} before" in prose)
    r50 = [rows[f"zhang-r50-{n}srv-100g"] for n in (2, 4, 8)]
    assert " / ".join(f"{r['mechanisms']:.3f}" for r in r50) + " against" in prose
    assert "(before " + " / ".join(f"{r['baseline']:.3f}" for r in r50) + ")" in prose
    samsi = rows["samsi-25gbe-vs-opa"]
    assert f"{samsi['mechanisms']:.2f} % fewer images/sec" in prose and f"(before {samsi['baseline']:.2f} %" in prose


# --- docs/moe.md: the validation of the expert kernels and host time ---------------------------------------------


@pytest.mark.parametrize("first_cell, args, published", [
    ("DeepSeek-V3, 256 GB200, FP8, TP1 PP4 VP4 EP64, mbs 1, gbs 4096",
     "--model deepseek-v3 --cluster gb200-nvl72 --gpus 256 --tp 1 --pp 4 --vp 4 --ep 64 --mbs 1 --gbs 4096", 4032),
    ("Qwen3-235B-A22B, 256 GB300, FP8, TP1 PP4 EP32, mbs 2, gbs 8192",
     "--model qwen3-235b-a22b --cluster gb300-nvl72 --gpus 256 --tp 1 --pp 4 --ep 32 --mbs 2 --gbs 8192", 6583)])
def test_moe_validation_rows(first_cell, args, published, tmp_path):
    text = section((DOCS / "moe.md").read_text(), "## Expert kernels, host time and calibrations")
    r = results(tmp_path, ["whatif", "llm", *args.split(), "--seq", "4096", "--precision", "fp8",
                           "--grad-dtype", "bf16"])
    ours = r["tokens_per_s"] / r["num_gpus"]
    assert table_row(text, first_cell)[2] == f"{ours:,.0f} ({ours / published - 1:+.1%})".replace("%", " %")
