"""`fabriclab simulate collective --cluster FILE --gpus N --sizes A:B`: the nccl-tests table a cluster predicts.

`run_cluster_prediction` loads a cluster file (from `fabriclab calibrate nccl-tests` or a preset), predicts
the collective on `num_gpus` GPUs at every size (`nccl/predict.py`: NCCL's choice of algorithm and protocol,
the flow-level simulator on the cluster's topology for the link time) and prints it: with
`--format nccl-tests` exactly in nccl-tests' layout (which `calibrate` reads back), else as a table with
the algorithm/protocol of every size. It returns the record (config and rows); the caller writes it.

Try it: `fabriclab simulate collective --cluster a100.json --gpus 128 --sizes 1KB:4GB --format nccl-tests`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.table import Table

from fabriclab.units import format_size

NCCL_TESTS_FORMAT = "nccl-tests"


def run_cluster_prediction(cluster_path: Path, num_gpus: int, sizes: list[int], collective: str,
                           fmt: str | None, out) -> dict:
    """Predict and print; returns {"config": ..., "results": rows}. `out` is a `cli.common.Output` (or None:
    one is made for `fmt`); `fmt == "nccl-tests"` prints nccl-tests' own text on stdout."""
    from fabriclab.fabric.cluster import load_cluster
    from fabriclab.nccl.log_writer import format_nccl_tests
    from fabriclab.nccl.predict import MODELLED, layout, predict_nccl_table, prediction_run
    from fabriclab.nccl.band import row_bands, spread_factors

    if collective not in MODELLED:
        raise ValueError(f"--collective {collective!r}: a cluster predicts {', '.join(MODELLED)}")
    cluster = load_cluster(cluster_path)
    lay = layout(cluster, num_gpus)
    rows = predict_nccl_table(cluster, num_gpus, sizes, collective)
    for row, band in zip(rows, row_bands(cluster, num_gpus, rows, collective)):
        row.update(busbw_low_GBps=band.busbw_low_GBps, busbw_high_GBps=band.busbw_high_GBps,
                   prior_parameters=list(band.prior_parameters))
    where = (f"{num_gpus} GPUs ({lay.num_servers} server{'s' if lay.num_servers > 1 else ''} x {lay.per_server}) "
             f"of {cluster.name} ({cluster_path})")
    if fmt == NCCL_TESTS_FORMAT:
        text = format_nccl_tests(prediction_run(cluster, num_gpus, rows, collective),
                                 notes=(f"prediction, not a measurement: {collective} on {where}",
                                        f"{cluster.network.fabric} network; algorithm/protocol per size: "
                                        + _switches(rows), *_band_notes(rows, spread_factors(cluster))))
        stream = sys.stderr if out is not None and getattr(out, "machine_stdout", False) else sys.stdout
        stream.write(text)
        stream.flush()
    else:
        if out is None:
            from fabriclab.cli.common import Output

            out = Output(fmt)
        out.table(_table(rows, f"predicted {collective} on {where}"))
        out.note(f"algorithm/protocol (NCCL's choice): {_switches(rows)}")
        for line in _band_notes(rows, spread_factors(cluster)):
            out.note(line)
    config = {"cluster": str(cluster_path), "cluster_name": cluster.name, "num_gpus": num_gpus,
              "num_servers": lay.num_servers, "collective": collective, "sizes_bytes": list(sizes),
              "network": cluster.network.fabric}
    return {"config": config, "results": rows}


def _switches(rows: list[dict]) -> str:
    """`ring/LL from 8B, ring/LL128 from 2MB, ...`: where the choice changes."""
    parts, last = [], None
    for r in rows:
        if r["algorithm"] != last:
            parts.append(f"{r['algorithm']} from {format_size(r['size_bytes'])}")
            last = r["algorithm"]
    return ", ".join(parts)


def _range(r: dict) -> str:
    return f"{r['busbw_low_GBps']:.2f}-{r['busbw_high_GBps']:.2f}" if r["prior_parameters"] else "fitted"


def _band_notes(rows: list[dict], factors: tuple[float, float]) -> tuple[str, ...]:
    """What the `busbw range` means, and which rows rest on parameters no log determined."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        if r["prior_parameters"]:
            groups.setdefault(tuple(r["prior_parameters"]), []).append(format_size(r["size_bytes"]))
    if not groups:
        return ("every row rests on fitted parameters only",)
    lines = [f"busbw range: parameters no log determined moved by {factors[0]:.2f}x (latencies) or "
             f"{factors[1]:.2f}x (rates) either way, as far as the fitted ones moved from their priors"]
    lines += [f"rests on priors ({', '.join(names)}): {sizes[0]}"
              + (f" to {sizes[-1]}" if len(sizes) > 1 else "") for names, sizes in groups.items()]
    return tuple(lines)


def _table(rows: list[dict], title: str) -> Table:
    table = Table(title=title)
    for col in ("size", "algorithm", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "busbw range", "in-place busbw"):
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    for r in rows:
        table.add_row(format_size(r["size_bytes"]), r["algorithm"], f"{r['time_us']:.2f}",
                      f"{r['algbw_GBps']:.2f}", f"{r['busbw_GBps']:.2f}", _range(r),
                      f"{r['inplace_busbw_GBps']:.2f}")
    return table
