"""How sure a cluster prediction is, row by row: which parameters no log determined, and the range they span.

A calibrated cluster (`fabriclab calibrate nccl-tests`) records for every parameter whether the logs moved
it (`fit.parameters[name].fitted`) or it kept its prior (a data sheet or NCCL's own constant). A predicted
row rests on the prior when its algorithm/protocol uses such a parameter: e.g. 32-128 GPUs run NCCL's
trees with LL128 at 256 KB - 32 MB, while a log of 16 GPUs shows trees only with LL below 64 KB, so the
tree/LL128 latencies and the tree's efficiency are NCCL's constants, not this cluster's.

A parameter the fit pushed to one of its bounds (`at_bound`: an efficiency of 1 where the rows ask for
more) counts as undetermined too.

The band moves every prior parameter of a row by the factor the *fitted* parameters of its kind moved away
from their priors on this cluster (RMS of log(fitted / prior): latencies one factor, bandwidths and
efficiencies another): the unknown constants are taken to be as wrong as the known ones turned out to be.
Latencies x/÷ that factor, rates ÷/x it (efficiencies capped at 1); the algorithm and protocol stay as
chosen. A cluster without a fit record (a preset) uses `DEFAULT_FACTOR` for everything.

A fitted parameter is only known as far as the fit saw it: the fit record keeps, per parameter, the most
time any fitted row spent on it (`reach_s`). A row spending more than `EXTRAPOLATION` times that (a tree
of 16 servers pays 4 network levels where a fit on 2 servers saw 1) treats it as unknown too, moved by at
least `EXTRAPOLATION` ("... beyond the fit" in `rests on`). Rows resting on nothing unknown get a band of
zero width. The fit's own misfit on its rows (`fit_scatter`, the RMS of log(measured / fitted)) widens every
range by its 90 % interval, `RANGE_Z` x that RMS either way (the RMS alone, a one-sigma width, would hold
about two rows in three). `calibrate --check` reports how many held-out rows the ranges hold (coverage).

Try it: `fabriclab simulate collective --cluster a100.json --gpus 128 --sizes 256KB:64MB` (columns
`busbw range`, `rests on`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.nccl.predict import COSTED, candidate_times
from fabriclab.nccl.fit import Param, apply, parameters

# Factor for a cluster that was never fitted (a preset): NCCL's constants against real clusters differ by
# about this much (the A100 logs moved fitted latencies by 0.55x-5.9x, rates by 0.72x-2x).
DEFAULT_FACTOR = 2.0
_RATE_WORDS = ("bandwidth", "efficiency", "link_factor", "cap")
_LATENCY_WORDS = {"base_s": "base latency", "intra_step_s": "intra step", "net_step_s": "net step"}
# A prior parameter is named for a row when moving it alone changes the row's time by more than this.
NAMED_ABOVE = 0.005
# A fitted parameter counts as extrapolated in a row that spends this many times more time on it than any
# fitted row did (a tree of 16 servers has 4 network levels where a fit on 2 servers saw 1); there it
# moves by at least this factor either way, however well the fit went.
EXTRAPOLATION = 1.5
_SLOPE_STEP = 0.01
# The fit's misfit enters a range as its 90 % interval: RMS x 1.645 in log terms (a normal misfit), where the
# RMS alone would hold about 68 % of the rows; the ranges are meant to hold 90 % of what they predict.
RANGE_Z = 1.645


@dataclass(frozen=True, kw_only=True)
class RowBand:
    """The range of one predicted row."""

    busbw_low_GBps: float
    """busbw with the row's prior parameters at their pessimistic end."""
    busbw_high_GBps: float
    """busbw with them at their optimistic end."""
    prior_parameters: tuple[str, ...]
    """The row's parameters that no log determined (short names, e.g. `tree.LL128 latency`)."""


def _is_rate(name: str) -> bool:
    return any(w in name for w in _RATE_WORDS)


def _short(name: str) -> str:
    parts = name.split(".")
    if parts[1] == "latencies":
        return f"{parts[2]}.{parts[3]} {_LATENCY_WORDS[parts[4]]}"
    if parts[1] == "protocols":
        return f"{parts[2]} {parts[3].removesuffix('_Bps').removesuffix('_s').replace('_', ' ')}"
    return parts[-1].removesuffix("_Bps").removesuffix("_s").replace("_", " ")


def _grouped(names: list[str]) -> tuple[str, ...]:
    """Short names; the three latencies of one algorithm/protocol as one `tree.LL128 latencies`."""
    out = []
    for n in names:
        parts = n.split(".")
        if parts[1] == "latencies" and all(f"library.latencies.{parts[2]}.{parts[3]}.{k}" in names
                                           for k in _LATENCY_WORDS):
            out.append(f"{parts[2]}.{parts[3]} latencies")
        else:
            out.append(_short(n))
    return tuple(dict.fromkeys(out))


def spread_factors(cluster: ClusterModel) -> tuple[float, float]:
    """(latency factor, rate factor): RMS of log(fitted / prior) over the fitted parameters of each kind."""
    fit = (cluster.fit or {}).get("parameters") or {}
    logs: dict[bool, list[float]] = {True: [], False: []}
    for name, p in fit.items():
        if p.get("fitted") and p.get("prior", 0) > 0 and p.get("value", 0) > 0:
            logs[_is_rate(name)].append(math.log(p["value"] / p["prior"]))
    out = []
    for kind in (False, True):
        values = logs[kind]
        out.append(math.exp(math.sqrt(sum(v * v for v in values) / len(values))) if values else DEFAULT_FACTOR)
    return out[0], out[1]


def prior_names(cluster: ClusterModel, params: list[Param]) -> set[str]:
    """Parameters the cluster's logs did not determine (all of them for a cluster never fitted)."""
    fit = (cluster.fit or {}).get("parameters")
    if fit is None:
        return {p.name for p in params}
    # a parameter the fit pushed to its bound is not determined either: the rows want it past the model's
    # range (an efficiency of 1 where the rows ask for more), so it is as unknown as a prior
    return {p.name for p in params if not fit.get(p.name, {}).get("fitted", False)
            or fit.get(p.name, {}).get("at_bound", False)}


def _moved(cluster: ClusterModel, params: list[Param], names: set[str], lat: float, rate: float,
           optimistic: bool) -> ClusterModel:
    """`cluster` with the parameters `names` at one end of their band (`params` built from `cluster`, so
    each one's `prior` is its value there)."""
    values = []
    for p in params:
        v = p.prior
        if p.name in names:
            if _is_rate(p.name):
                v = v * rate if optimistic else v / rate
                if "efficiency" in p.name or "link_factor" in p.name:
                    v = min(v, 1.0)
            else:
                v = v / lat if optimistic else v * lat
        values.append(v)
    return apply(cluster, params, values)


def _band_inputs(cluster: ClusterModel) -> tuple[list[Param], set[str], float, float]:
    """(parameters, the undetermined ones' names, latency factor, rate factor)."""
    params = parameters(cluster)
    return (params, prior_names(cluster, params), *spread_factors(cluster))


def moved_clusters(cluster: ClusterModel) -> tuple[ClusterModel, ClusterModel]:
    """(pessimistic, optimistic): `cluster` with every parameter no log determined moved to each end of its
    band (what a model built on the cluster, e.g. the what-if's bucket costs, can be re-run with)."""
    params, unknown, lat, rate = _band_inputs(cluster)
    return (_moved(cluster, params, unknown, lat, rate, False), _moved(cluster, params, unknown, lat, rate, True))


def fit_reach(cluster: ClusterModel) -> dict[str, float]:
    """Fitted parameter -> the most time any fitted row spent on it, |d time / d log value| in s (empty for
    a cluster whose fit record predates it, or a preset)."""
    fit = (cluster.fit or {}).get("parameters") or {}
    return {n: float(p["reach_s"]) for n, p in fit.items() if p.get("fitted") and "reach_s" in p}


def _slopes(cluster: ClusterModel, params: list[Param], names, num_gpus: int, sizes: np.ndarray, collective: str,
            gpus_per_process: int, base: dict) -> dict[str, dict]:
    """name -> (algorithm, protocol) -> |d time / d log value| at every size, s."""
    out = {}
    for name in names:
        values = [p.prior * (math.exp(_SLOPE_STEP) if p.name == name else 1.0) for p in params]
        moved = candidate_times(apply(cluster, params, values), num_gpus, sizes, collective,
                                gpus_per_process=gpus_per_process)
        out[name] = {k: np.abs(moved[k] - base[k]) / _SLOPE_STEP for k in base}
    return out


def row_bands(cluster: ClusterModel, num_gpus: int, rows: list[dict], collective: str = "allreduce", *,
              gpus_per_process: int = 1) -> list[RowBand]:
    """One band per predicted row (rows as `predict_nccl_table` gives them, `algorithm` = `algo/proto`)."""
    if num_gpus == 1 or not rows:
        return [RowBand(busbw_low_GBps=r["busbw_GBps"], busbw_high_GBps=r["busbw_GBps"], prior_parameters=())
                for r in rows]
    params, unknown, lat, rate = _band_inputs(cluster)
    sizes = np.array([r["size_bytes"] for r in rows], dtype=np.float64)

    def times(names: set[str], optimistic: bool) -> dict:
        model = _moved(cluster, params, names & unknown, lat, rate, optimistic)
        if names - unknown:  # fitted, but used beyond the fit: at least EXTRAPOLATION either way
            model = _moved(model, parameters(model), names - unknown, max(lat, EXTRAPOLATION),
                           max(rate, EXTRAPOLATION), optimistic)
        return candidate_times(model, num_gpus, sizes, collective, gpus_per_process=gpus_per_process)

    base = times(set(), False)
    reach = fit_reach(cluster)
    slopes = _slopes(cluster, params, sorted(reach), num_gpus, sizes, collective, gpus_per_process, base)
    keys = [tuple(r["algorithm"].split("/")) for r in rows]
    # a fitted parameter a row spends more time on than any fitted row did (a deeper tree, more network
    # steps): its fitted value is an extrapolation there, as uncertain as a prior one
    beyond = [{n for n in reach if k in slopes[n] and slopes[n][k][i] > EXTRAPOLATION * reach[n] + 1e-8}
              for i, k in enumerate(keys)]
    ends: dict[frozenset, tuple[dict, dict]] = {}
    for extra in {frozenset(b) for b in beyond}:
        moved = unknown | extra
        ends[extra] = (times(moved, False), times(moved, True))
    alone = {n: times({n}, False) for n in sorted(unknown | set().union(*beyond))}
    factor = bus_bandwidth_factor(collective, num_gpus)
    # the fit's own misfit on its rows (calibration.fit_scatter, the RMS of log(measured / fitted)): no
    # prediction from it is surer than that; the range spans its 90 % interval (RANGE_Z of it either way)
    scatter = float((cluster.fit or {}).get("fit_scatter", 1.0)) ** RANGE_Z
    out = []
    for i, (r, key, extra) in enumerate(zip(rows, keys, beyond)):
        if key[0] not in COSTED:  # NCCL's own estimate of an algorithm no log here runs: as sure as a prior
            spread = max(lat, rate)
            out.append(RowBand(busbw_low_GBps=r["busbw_GBps"] / spread, busbw_high_GBps=r["busbw_GBps"] * spread,
                               prior_parameters=(f"NCCL {cluster.library.nccl_version}'s own {key[0]} estimate",)))
            continue
        worst, best = ends[frozenset(extra)]
        # a parameter the chosen algorithm/protocol does not use leaves its time as it is
        used = [n for n in sorted(unknown | extra) if abs(alone[n][key][i] / base[key][i] - 1) > NAMED_ABOVE]
        names = _grouped([n for n in used if n in unknown]) + tuple(
            f"{n} beyond the fit" for n in _grouped([n for n in used if n not in unknown]))
        lo = sizes[i] / worst[key][i] / 1e9 * factor if used else r["busbw_GBps"]
        hi = sizes[i] / best[key][i] / 1e9 * factor if used else r["busbw_GBps"]
        out.append(RowBand(busbw_low_GBps=float(min(lo, r["busbw_GBps"]) / scatter),
                           busbw_high_GBps=float(max(hi, r["busbw_GBps"]) * scatter), prior_parameters=names))
    return out
