"""`fabriclab validate nccl-tests`: the NCCL model against a corpus of real clusters' nccl-tests runs.

For every cluster of the corpus (`examples/nccl-corpus`: published logs with their source, what the poster
said and a cluster file; `bench/validate/nccl_corpus.py`) it calibrates on the smaller runs and predicts
the larger ones (`bench/validate/nccl_tests.py`), then prints one table per size band (>= 64 MB, 1-16 MB,
64-512 KB): per cluster the predicted rows, mean and max |error| against the band's goal, and how many
rows the printed busbw range holds (`!`: a cluster measured degraded, as its poster or NCCL's maintainers
said: in the tables, out of the `all` row, whose share of rows in range is also printed with them).
`--models both` adds the model without the corpus's mechanisms.
The record (kind `validate.nccl-tests`) keeps every predicted row.

Try it: `fabriclab validate nccl-tests --models both`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, split_list, user_errors
from fabriclab.units import format_size

KIND = "validate.nccl-tests"
MODEL_CHOICES = {"baseline": ("baseline",), "mechanisms": ("mechanisms",), "both": ("baseline", "mechanisms")}
DEFAULT_CORPUS = Path("examples") / "nccl-corpus"
MODEL_WORDS = {"baseline": "before", "mechanisms": "after"}  # the band tables' model column


def register(validate_app: typer.Typer) -> None:
    """Add `nccl-tests` to the `validate` group."""
    validate_app.command("nccl-tests")(nccl_tests)


def default_corpus() -> Path:
    """examples/nccl-corpus here, else beside the installed package's source tree."""
    if DEFAULT_CORPUS.is_dir():
        return DEFAULT_CORPUS
    import fabriclab

    return Path(fabriclab.__file__).resolve().parents[2] / DEFAULT_CORPUS


@user_errors
def nccl_tests(
    corpus: Annotated[Optional[Path], typer.Option(metavar="DIR", help=(
        "Corpus folder: one folder per cluster with corpus.json (default examples/nccl-corpus)."))] = None,
    clusters: Annotated[Optional[str], typer.Option(metavar="A,B", help=(
        "Only these clusters (folder names, comma separated; default all)."))] = None,
    models: Annotated[str, typer.Option(help=(
        "mechanisms (the calibration as it is), baseline (without the corpus's mechanisms) or both."))]
    = "mechanisms",
    min_servers: Annotated[int, typer.Option(metavar="N", help=(
        "Count only predicted rows on N or more servers (4: where trees and NICs at scale decide)."))] = 1,
    show_rows: Annotated[bool, typer.Option("--rows", help=(
        "Also print every predicted row: NCCL's choice, measured and predicted busbw, the range."))] = False,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Fit each corpus cluster on its smaller runs, predict its larger ones: errors per size band."""
    from fabriclab.bench.validate.nccl_corpus import load_corpus
    from fabriclab.bench.validate.nccl_tests import band_summary, validate_cluster

    if models not in MODEL_CHOICES:
        raise ValueError(f"--models {models!r}: use mechanisms, baseline or both")
    if min_servers < 1:
        raise ValueError(f"--min-servers {min_servers}: give 1 or more")
    names = tuple(split_list(clusters, "cluster list")) if clusters else None
    root = corpus or default_corpus()
    out = Output(fmt, json_path, store)
    entries = load_corpus(root, names)
    results = {m: [validate_cluster(c, m) for c in entries] for m in MODEL_CHOICES[models]}
    out.table(clusters_table(entries, results[MODEL_CHOICES[models][-1]]))
    summaries = {m: band_summary(r, min_servers=min_servers) for m, r in results.items()}
    covered = show_bands(out, [row for m in summaries for row in summaries[m]], min_servers)
    shown = {row["cluster"] for m in summaries for row in summaries[m]}
    degraded = [res for res in results[MODEL_CHOICES[models][-1]] if res.degraded and res.name in shown]
    if degraded:
        out.note("measured degraded (`!`: in the tables, out of `all`):")
        for res in degraded:
            for line in textwrap.wrap(f"{res.name}: {res.degraded}", 78, subsequent_indent="    "):
                out.note("  " + line)
    if show_rows:
        for m in results:
            for res in results[m]:
                if res.rows:
                    out.table(rows_table(res))
    for res in results[MODEL_CHOICES[models][-1]]:
        if res.error:
            out.note(f"{res.name}: not judged: {res.error}")
    out.record(KIND, {"corpus": str(root), "clusters": [c.name for c in entries], "models": list(results),
                      "min_servers": min_servers},
               {"bands": [row for m in summaries for row in summaries[m]], "coverage": covered,
                "clusters": [res.as_dict() for m in results for res in results[m]]})


def show_bands(out: Output, summary: list[dict], min_servers: int) -> list[dict]:
    """A table per size band with its `all` lines, then the coverage over every band (returned)."""
    from fabriclab.bench.validate.nccl_tests import band_words, coverage, coverage_words

    for band in ("64-512 KB", "1-16 MB", ">= 64 MB"):
        band_rows = [row for row in summary if row["band"] == band]
        if band_rows:
            out.table(band_table(band, band_rows, min_servers))
            for row in band_rows:
                if row["cluster"] in ("all", "all+degraded"):
                    for line in band_words(row):
                        out.note(line)
    covered = coverage(summary)
    for row in covered:
        for line in coverage_words(row):
            out.note(line)
    return covered


def clusters_table(entries, results) -> Table:
    """One line per cluster: its hardware, how it is split, the NCCL the model ran."""
    table = Table(title="corpus: fit the smaller runs, predict the larger (* NCCL assumed)")
    for col in ("cluster", "GPU", "NICs", "fit -> predict", "NCCL"):
        table.add_column(col, justify="left")
    for entry, res in zip(entries, results):
        hw = entry.hardware
        version = res.version_note.split(" (")[0].split(":")[0].removeprefix("NCCL ") if res.version_note else "-"
        if hw.get("model_nccl_version") and not hw.get("nccl_version"):
            version += "*"
        gpu = hw["gpu"].replace("NVIDIA ", "").split()[0].split("-")[0]  # H100, A100-SXM4-40GB -> A100
        table.add_row(entry.name, gpu, f"{hw['nics_per_server']}x{hw['nic']}",
                      res.split, version)
    return table


def band_table(band: str, rows: list[dict], min_servers: int) -> Table:
    """One band: per cluster (and all), rows, median / max |error| %, within the goal (every row: yes; the
    median row: median), inside the range."""
    goal = rows[0]["goal_pct"]
    where = f", {min_servers}+ servers" if min_servers > 1 else ""
    table = Table(title=f"{band}: predicted rows{where}, |error| % (goal {goal:g} %); before: baseline")
    for col in ("cluster", "model", "GPUs", "rows", "median", "max", "goal", "in range"):
        table.add_column(col, justify="left" if col in ("cluster", "model", "GPUs") else "right")
    for r in rows:
        name = (f"all ({r['clusters']})" if r["cluster"] == "all" else f"+degraded ({r['clusters']})"
                if r["cluster"] == "all+degraded" else r["cluster"] + (" !" if r.get("degraded") else ""))
        gpus = ",".join(map(str, r["servers"])) if len(r["servers"]) <= 3 else f"{r['servers'][0]}-{r['servers'][-1]}"
        in_range = f"{r['inside']}/{r['ranged']}" if r["ranged"] else "-"
        goal_word = "yes" if r["within_goal"] else "median" if r["median_within_goal"] else "no"
        table.add_row(name, MODEL_WORDS[r["model"]], gpus, str(r["rows"]), f"{r['median_abs_error_pct']:.1f}",
                      f"{r['max_abs_error_pct']:.1f}", goal_word, in_range)
    return table


def rows_table(res) -> Table:
    """Every predicted row of one cluster."""
    table = Table(title=f"{res.name} ({res.model}): predicted rows, busbw GB/s")
    for col in ("GPUs", "size", "NCCL runs", "measured", "model", "error %", "range"):
        table.add_column(col, justify="left" if col == "NCCL runs" else "right")
    for r in res.rows:
        span = "-" if r.busbw_low_GBps is None else f"{r.busbw_low_GBps:.3g}-{r.busbw_high_GBps:.3g}"
        table.add_row(str(r.num_gpus), format_size(r.size_bytes), r.choice, f"{r.measured_busbw_GBps:.2f}",
                      f"{r.predicted_busbw_GBps:.2f}", f"{r.error_pct:+.1f}", span)
    return table
