"""Fit the RoCE congestion parameters (`nccl/congestion.py`: onset, the two settle shares, the recovery) on
a record of packet-level runs written by `fabriclab bench simai --json`, and say what each case gives.

The fit takes the oversubscribed cases (2:1 and 4:1) whose algorithm fabriclab costs on the topology (ring,
tree, point-to-point; NCCL's NVLS algorithms are costed by NCCL's own estimate, which no network setting
moves), and minimises the mean squared log ratio ns-3 / fabriclab over a grid. Nothing else is fitted: the
routing, the flows and the rates are the model's own. The shipped parameters came from
`docs/measurements/simai/fit-32gpu.json`; the held-out record is never fitted.

Try it: `python -m fabriclab.bench.simai.fit docs/measurements/simai/fit-32gpu.json`.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

from fabriclab.bench.simai.compare import predict
from fabriclab.bench.simai.inputs import SimaiCase
from fabriclab.nccl import congestion

GRID = {"onset_bytes": (0.5e6, 1e6, 2e6, 3e6, 5e6, 8e6), "settle_restart": (0.4, 0.45, 0.5, 0.55, 0.6, 0.7),
        "settle_steady": (0.7, 0.8, 0.85, 0.9, 0.95, 1.0), "recovery_s": (0.0, 250e-6, 500e-6, 750e-6, 900e-6)}
TOPOLOGY_COSTED = ("ring", "tree", "p2p")


def measured_cases(path: Path | str) -> list[tuple[SimaiCase, float]]:
    """(case, ns-3 median seconds) of every case of a `bench simai` record that gave a time."""
    data = json.loads(Path(path).read_text())
    cases = data["results"]["cases"]
    out = []
    for c in cases:
        median = c["ns3"]["median_s"]
        if median:
            fields = {k: v for k, v in c["case"].items() if k != "label"}
            out.append((SimaiCase(**fields), float(median)))
    return out


def errors(cases: list[tuple[SimaiCase, float]], params: dict) -> list[tuple[SimaiCase, float, float, str]]:
    """(case, ns-3, fabriclab, algorithm) with the roce transport at `params`."""
    saved = congestion.TRANSPORTS["roce"]
    congestion.TRANSPORTS["roce"] = replace(saved, **params)
    try:
        rows = []
        for case, ns3 in cases:
            p = predict(case)
            rows.append((case, ns3, p["time_s"], p["algorithm"]))
        return rows
    finally:
        congestion.TRANSPORTS["roce"] = saved


def _loss(rows) -> float:
    logs = [math.log(ns3 / fl) ** 2 for case, ns3, fl, algo in rows
            if case.oversubscription > 1 and algo.split("/")[0] in TOPOLOGY_COSTED]
    return sum(logs) / max(1, len(logs))


def fit(cases: list[tuple[SimaiCase, float]]) -> tuple[dict, float]:
    """The grid point of least loss, and the loss."""
    best, best_loss = None, math.inf
    keys = list(GRID)
    for values in itertools.product(*(GRID[k] for k in keys)):
        params = dict(zip(keys, values))
        loss = _loss(errors(cases, params))
        if loss < best_loss:
            best, best_loss = params, loss
    return best, best_loss


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m fabriclab.bench.simai.fit RECORD.json", file=sys.stderr)
        return 2
    cases = measured_cases(argv[0])
    params, loss = fit(cases)
    print(f"fitted on {argv[0]}: {params} (mean squared log ratio {loss:.4f})")
    for case, ns3, fl, algo in errors(cases, params):
        print(f"{case.label:34s} {algo:18s} ns-3 {ns3 * 1e6:9.1f} us  fabriclab {fl * 1e6:9.1f} us  "
              f"ratio {ns3 / fl:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
