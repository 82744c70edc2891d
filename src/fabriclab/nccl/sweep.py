"""A cluster's predicted size sweep of one collective, as nccl-tests would print it, with its ranges.

`predict_sweep` gives one row per size (`nccl/predict.py`: the algorithm and protocol the library picks,
the time, algbw, busbw, in-place busbw) with the busbw range over the parameters no log determined
(`nccl/band.py`); `switches` and `band_notes` say in words where the choice changes and which rows rest
on priors.

Try it: `fabriclab simulate collective --cluster dgx-h100 --gpus 64 --sizes 8B:1GB --format nccl-tests`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.nccl.band import row_bands, spread_factors
from fabriclab.nccl.log_writer import format_nccl_tests
from fabriclab.nccl.layout import Layout, check_cluster_gpus
from fabriclab.nccl.predict import MODELLED, predict_nccl_table, prediction_run
from fabriclab.units import format_size


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """Predicted rows of one collective on `num_gpus` GPUs of a cluster."""

    cluster: ClusterModel
    collective: str
    layout: Layout
    rows: list

    @property
    def where(self) -> str:
        from fabriclab.fabric.buildings import num_buildings

        from fabriclab.fabric.domains import placement_note

        lay = self.layout
        b = num_buildings(self.cluster.network, lay.num_servers)
        placed = placement_note(self.cluster, lay.num_gpus)
        if placed:
            return f"{placed.replace(f'{lay.num_gpus} GPUs', f'{lay.num_gpus} GPUs:', 1)} of {self.cluster.name}"
        return (f"{lay.num_gpus} GPUs ({lay.num_servers} server{'s' if lay.num_servers > 1 else ''} x "
                f"{lay.per_server}{f' in {b} buildings' if b > 1 else ''}) of {self.cluster.name}")

    def nccl_tests_text(self) -> str:
        """The sweep as nccl-tests prints a run, with the prediction's notes as comment lines."""
        return format_nccl_tests(prediction_run(self.cluster, self.layout.num_gpus, self.rows, self.collective),
                                 notes=(f"prediction, not a measurement: {self.collective} on {self.where}",
                                        f"{self.cluster.network.fabric} network; algorithm/protocol per size: "
                                        + switches(self.rows), *band_notes(self.rows, self.cluster)))


def predict_sweep(cluster: ClusterModel, num_gpus: int, sizes: list[int], collective: str) -> Sweep:
    """Every size's prediction and busbw range; a ValueError for a collective or GPU count it cannot take."""
    if collective not in MODELLED:
        raise ValueError(f"--collective {collective!r}: a cluster predicts {', '.join(MODELLED)}")
    lay = check_cluster_gpus(cluster, num_gpus)
    rows = predict_nccl_table(cluster, num_gpus, sizes, collective)
    for row, band in zip(rows, row_bands(cluster, num_gpus, rows, collective)):
        row.update(busbw_low_GBps=band.busbw_low_GBps, busbw_high_GBps=band.busbw_high_GBps,
                   prior_parameters=list(band.prior_parameters))
    return Sweep(cluster=cluster, collective=collective, layout=lay, rows=rows)


def switches(rows: list[dict]) -> str:
    """`ring/LL from 8B, ring/LL128 from 2MB, ...`: where the choice changes."""
    parts, last = [], None
    for r in rows:
        if r["algorithm"] != last:
            parts.append(f"{r['algorithm']} from {format_size(r['size_bytes'])}")
            last = r["algorithm"]
    return ", ".join(parts)


def band_notes(rows: list[dict], cluster: ClusterModel) -> tuple[str, ...]:
    """What the busbw range means, and which rows rest on parameters no log determined."""
    factors = spread_factors(cluster)
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
