"""Fit a cluster model to nccl-tests runs, and report the residuals row by row.

The fit starts from a prior cluster (data sheets and NCCL's constants, `fabric/cluster.py`) and moves the
parameters the runs determine: launch and host costs, the per-GPU intra-server bandwidth, the memory
pass, the NIC efficiency, LL's per-byte cost, LL128's busbw ceiling, the tree's efficiency and every
(algorithm, protocol) latency. It minimises the squared log error of the predicted times (out of place
and in place; 1-rank runs move nothing between GPUs and are left out) plus a weak pull of every parameter
towards its prior (a penalty on log(value / prior)), by Levenberg-Marquardt on a bounded log scale. A
parameter no row depends on stays at its prior; the report marks it `prior` (a network step's prior takes
the network's fitted excess of its algorithm along, `carry_network_hop`: `prior + fitted net hop`). NCCL's
choice of algorithm and protocol per row comes from its own tuning model (`nccl/choice.py`) and is fixed
during the fit.

Never fit to the rows you check: `calibrate(runs)` fits on `runs`; `check(cluster, runs)` predicts
others and gives their errors.

Try it: `fabriclab calibrate nccl-tests examples/nccl-tests-a100/nccl_{2,4,8,16}.log --out a100.json`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.nccl.logs import NcclRun
from fabriclab.nccl.layout import layout, on_servers
from fabriclab.nccl.library import resolved
from fabriclab.nccl.predict import COSTED, candidate_times, collective_times
from fabriclab.nccl.choice import nccl_choices

# Weight of the pull towards the prior per parameter, in squared log units: a parameter moved by a factor
# e costs as much as one row 10 % off. Rows determine what they can; the rest stays where the prior is.
PRIOR_WEIGHT = 0.01
MAX_ITERATIONS = 200


@dataclass(frozen=True, kw_only=True)
class Param:
    """One fitted parameter: where it lives in the model, its prior and its bounds."""

    name: str
    """Dotted path in the cluster model, e.g. `server.nic_efficiency`, `library.latencies.ring.LL.base_s`."""
    prior: float
    """Value in the prior cluster."""
    lower: float
    """Smallest value allowed."""
    upper: float
    """Largest value allowed."""


@dataclass(frozen=True, kw_only=True)
class FittedParam:
    """A parameter after the fit."""

    name: str
    """Dotted path in the model."""
    value: float
    """Fitted value."""
    prior: float
    """Prior value."""
    determined: bool
    """Whether it was fitted: the rows say more about it than the prior's pull; else it kept the prior."""
    at_bound: bool = False
    """Fitted to one of its bounds: the rows push it further than the model allows."""
    information: float = 0.0
    """Sum over the fitted rows of (d log-error / d log value)^2 at the fitted value."""
    leverage: float = 0.0
    """Largest |d log time / d log value| over the fitted rows: how strongly any row the fit saw leaned on
    the parameter."""
    reach_s: float = 0.0
    """Largest |d time / d log value| over the fitted rows, s: the most time any fitted row spent on the
    parameter (a latency's steps x value); a prediction spending more extrapolates (`nccl/band.py`)."""


@dataclass(frozen=True, kw_only=True)
class Residual:
    """Measured against predicted for one row."""

    source: str
    """Log the row is from."""
    num_gpus: int
    """GPUs of the run."""
    size_bytes: int
    """Buffer size."""
    num_servers: int = 0
    """Servers the run used (a run may use part of each); 0 where not known."""
    choice: str
    """Algorithm/protocol NCCL runs there (by its tuning model)."""
    measured_busbw_GBps: float
    """Measured out-of-place busbw."""
    predicted_busbw_GBps: float
    """Predicted busbw."""
    error_pct: float
    """(predicted / measured - 1) x 100, out of place."""
    inplace_error_pct: float | None
    """The same for the in-place column; None when the log has none."""
    held_out: bool
    """True when the row was not used by the fit."""
    collective: str = "allreduce"
    """Collective of the row's run."""
    busbw_low_GBps: float | None = None
    """Low end of the printed busbw range (held-out rows; `nccl/band.py`), else None."""
    busbw_high_GBps: float | None = None
    """High end of that range."""

    def servers(self, gpus_per_server: int) -> int:
        """Servers the row's run used: as its log says (a run may use part of each server), else its GPUs
        over whole servers of `gpus_per_server`."""
        return self.num_servers or max(1, self.num_gpus // gpus_per_server)


@dataclass(frozen=True, kw_only=True)
class FitResult:
    """The fitted cluster, the parameters and the residuals."""

    cluster: ClusterModel
    """Fitted cluster."""
    params: tuple[FittedParam, ...]
    """Every fitted parameter."""
    residuals: tuple[Residual, ...]
    """One per row of the fitted runs."""
    cost: float
    """Final objective (squared log errors + prior penalty)."""


def parameters(prior: ClusterModel) -> list[Param]:
    """The parameters `calibrate` fits, with bounds around the prior."""
    prior = resolved(prior)
    s, lib = prior.server, prior.library
    out = [Param(name="library.launch_s", prior=lib.launch_s, lower=1e-7, upper=5e-5),
           Param(name="library.host_overhead_s", prior=lib.host_overhead_s, lower=1e-8, upper=2e-5),
           # not above the link's raw rate: prior = rate x packet efficiency (NVLink 0.94, PCIe 0.91)
           Param(name="server.intra_bandwidth_Bps", prior=s.intra_bandwidth_Bps,
                 lower=s.intra_bandwidth_Bps / 50, upper=s.intra_bandwidth_Bps / 0.9),
           Param(name="server.memory_bandwidth_Bps", prior=s.memory_bandwidth_Bps,
                 lower=s.memory_bandwidth_Bps / 50, upper=s.memory_bandwidth_Bps * 4),
           Param(name="server.nic_efficiency", prior=s.nic_efficiency, lower=0.05, upper=1.0),
           # a tree reaches at most its links' rate; NCCL's own model says 0.9. Below 1/2 small-size rows
           # (whose slope LL's per-byte cost explains as well) would decide what large trees cost.
           Param(name="library.tree_efficiency", prior=lib.tree_efficiency, lower=0.5, upper=1.0)]
    if "LL" in lib.protocols:
        # NCCL's model gives LL 1/4 of the link; its wire format (4 B of data per 8 B line) allows 1/2.
        # LL128's 120/128 and Simple's 1 are wire-format facts and stay fixed.
        out.append(Param(name="library.protocols.LL.link_factor", prior=lib.protocols["LL"].link_factor,
                         lower=0.02, upper=0.5))
    for proto, spec in lib.protocols.items():
        if spec.per_byte_s > 0:
            out.append(Param(name=f"library.protocols.{proto}.per_byte_s", prior=spec.per_byte_s,
                             lower=spec.per_byte_s / 100, upper=spec.per_byte_s * 100))
        if spec.busbw_cap_Bps is not None:
            out.append(Param(name=f"library.protocols.{proto}.busbw_cap_Bps", prior=spec.busbw_cap_Bps,
                             lower=1e9, upper=spec.busbw_cap_Bps * 10))
    if lib.p2p_channel_bandwidth_Bps is not None:
        out.append(Param(name="library.p2p_channel_bandwidth_Bps", prior=lib.p2p_channel_bandwidth_Bps,
                         lower=lib.p2p_channel_bandwidth_Bps / 10, upper=lib.p2p_channel_bandwidth_Bps * 10))
    for algo in lib.algorithms:
        for proto, lat in lib.latencies[algo].items():
            for key in ("base_s", "intra_step_s", "net_step_s"):
                value = getattr(lat, key)
                out.append(Param(name=f"library.latencies.{algo}.{proto}.{key}", prior=value,
                                 lower=max(value / 100, 1e-9), upper=max(value * 100, 1e-5)))
    return out


def apply(cluster: ClusterModel, params: list[Param], values) -> ClusterModel:
    """`cluster` with every parameter set to its value."""
    cluster = resolved(cluster)
    server, lib = cluster.server, cluster.library
    s_changes, l_changes = {}, {}
    protocols = dict(lib.protocols)
    latencies = {a: dict(row) for a, row in lib.latencies.items()}
    for p, v in zip(params, values):
        parts = p.name.split(".")
        if parts[0] == "server":
            s_changes[parts[1]] = float(v)
        elif parts[1] == "protocols":
            protocols[parts[2]] = replace(protocols[parts[2]], **{parts[3]: float(v)})
        elif parts[1] == "latencies":
            latencies[parts[2]][parts[3]] = replace(latencies[parts[2]][parts[3]], **{parts[4]: float(v)})
        else:
            l_changes[parts[1]] = float(v)
    lib = replace(lib, protocols=protocols, latencies=latencies, **l_changes)
    return replace(cluster, server=replace(server, **s_changes), library=lib)


def _observations(runs: list[NcclRun], cluster: ClusterModel, keep=None):
    """Per run: sizes, measured times (s; NaN where absent), fixed choices, which rows are used."""
    obs = []
    for run in runs:
        if run.num_ranks < 2:
            continue
        if run.num_servers > 1 and run.gpus_per_server > cluster.server.gpus_per_server:
            raise ValueError(f"{run.source}: {run.gpus_per_server} GPUs per server, the cluster has "
                             f"{cluster.server.gpus_per_server}: calibrate logs of one kind of server")
        layout(seen_by(cluster, run), run.num_ranks)  # a clear error when the run does not fit the cluster
        sizes = np.array([r.size_bytes for r in run.rows], dtype=np.float64)
        t_out = np.array([r.time_us * 1e-6 for r in run.rows])
        t_in = np.array([np.nan if r.inplace_time_us is None else r.inplace_time_us * 1e-6 for r in run.rows])
        used = np.ones(sizes.size, bool) if keep is None else np.array([keep(run, int(s)) for s in sizes])
        obs.append((run, sizes, t_out, t_in, used))
    return obs


def seen_by(cluster: ClusterModel, run: NcclRun) -> ClusterModel:
    """The cluster as `run` sees it: servers of the GPUs it uses on each (`layout.on_servers`)."""
    return on_servers(cluster, run.num_ranks, run.num_servers)


def _chosen(cluster: ClusterModel, run: NcclRun, sizes: np.ndarray) -> list[tuple[str, str]]:
    cluster = seen_by(cluster, run)
    if cluster.library.selection == "nccl":
        return nccl_choices(cluster, run.num_ranks, sizes, run.collective, layout(cluster, run.num_ranks).num_servers)
    cand = candidate_times(cluster, run.num_ranks, sizes, run.collective, gpus_per_process=run.gpus_per_process)
    keys = list(cand)
    best = np.stack([cand[k] for k in keys]).argmin(axis=0)
    return [keys[i] for i in best]


def _predicted(cluster: ClusterModel, run: NcclRun, sizes: np.ndarray, chosen) -> np.ndarray:
    cand = candidate_times(seen_by(cluster, run), run.num_ranks, sizes, run.collective,
                           gpus_per_process=run.gpus_per_process)
    return np.array([cand[c][i] for i, c in enumerate(chosen)])


def calibrate(runs: list[NcclRun], prior: ClusterModel, *, keep=None,
              prior_weight: float = PRIOR_WEIGHT, estimates_fit: bool = False) -> FitResult:
    """Fit `prior`'s parameters to `runs` (rows where `keep(run, size)` is true; default all). Rows whose
    algorithm NCCL's own estimate costs (not `predict.COSTED`) are left out unless `estimates_fit`."""
    obs = _observations(runs, prior, keep)
    if not any(used.any() for *_, used in obs):
        raise ValueError("no rows to fit: give logs of 2 or more GPUs (a 1-GPU run moves no data between GPUs)")
    params = parameters(prior)
    choices = [_chosen(prior, run, sizes) for run, sizes, *_ in obs]
    if not estimates_fit:
        # Rows NCCL runs with an algorithm it costs by its own estimate (NVLS, NVLS-tree, CollNet, PAT:
        # `predict.COSTED`) say nothing about this cluster's links, memory or latencies: fitted, their
        # misfit would move the memory pass or the launch cost of every other row (an H100's 2-server
        # NVLS-tree rows took the memory pass from 1.7 TB/s to 0.5 TB/s, and 32 GPUs' rings with it).
        obs = [(run, sizes, t_out, t_in, used & np.array([c[0] in COSTED for c in chosen]))
               for (run, sizes, t_out, t_in, used), chosen in zip(obs, choices)]
        # (when that leaves no row, as in H100 logs from 1 MiB up, nothing is fitted: the prior predicts)

    def log_predicted(values: np.ndarray) -> np.ndarray:
        model = apply(prior, params, values)
        parts = []
        for (run, sizes, t_out, t_in, used), chosen in zip(obs, choices):
            pred = _predicted(model, run, sizes, chosen)
            parts += [np.log(pred[used & (measured > 0)]) for measured in (t_out, t_in)]
        return np.concatenate(parts)

    log_measured = np.concatenate([np.log(m[used & (m > 0)]) for _, _, t_out, t_in, used in obs
                                   for m in (t_out, t_in)])

    def data_residual(values: np.ndarray) -> np.ndarray:
        return log_predicted(values) - log_measured

    prior_values = np.array([p.prior for p in params])
    # Fit only what the rows say something about; the rest keeps its prior value.
    active = information(data_residual, prior_values, params) > prior_weight
    lo = np.log([p.lower for p in params])[active]
    span = np.log([p.upper for p in params])[active] - lo
    log_prior = np.log(prior_values[active])

    def values(x: np.ndarray) -> np.ndarray:
        out = prior_values.copy()
        out[active] = np.exp(lo + span / (1 + np.exp(-np.clip(x, -30, 30))))
        return out

    def residual(x: np.ndarray) -> np.ndarray:
        v = values(x)
        return np.concatenate([data_residual(v), math.sqrt(prior_weight) * (np.log(v[active]) - log_prior)])

    frac = np.clip((log_prior - lo) / span, 1e-6, 1 - 1e-6)
    if active.any():
        x, cost = _levenberg_marquardt(residual, np.log(frac / (1 - frac)))
    else:  # no row to fit (see above): every parameter keeps its prior
        x, cost = np.zeros(0), 0.0
    fitted = carry_network_hop(params, values(x), active)
    info, lever, reach = sensitivities(log_predicted, fitted, params)
    cluster = apply(prior, params, fitted)
    result_params = tuple(FittedParam(name=p.name, value=float(v), prior=p.prior, determined=bool(a),
                                      at_bound=bool(a and (v <= p.lower * 1.001 or v >= p.upper / 1.001)),
                                      information=float(i), leverage=float(lv), reach_s=float(rc))
                          for p, v, a, i, lv, rc in zip(params, fitted, active, info, lever, reach))
    residuals = tuple(r for run, *_ in obs for r in check(cluster, [run], keep=keep, fitted=True))
    return FitResult(cluster=cluster, params=result_params, residuals=residuals, cost=float(cost))


def carry_network_hop(params: list[Param], values: np.ndarray, active: np.ndarray) -> np.ndarray:
    """`values` with every network-step latency no row determined moved by what the network added to the
    fitted ones of the same algorithm.

    A step across the network costs NCCL's constant for the protocol (hwLat NET, `src/graph/tuning.cc`:
    what the protocol's own handshake adds) plus what this cluster's network adds per hop (NIC, switches,
    the proxy's turn), and the second part is the same whichever protocol crosses it. So when the logs
    determine an algorithm's network step for one protocol (a 2-server log runs trees with LL only), its
    excess over NCCL's constant is this network's per-hop latency, and the algorithm's other protocols
    (tree/LL128, which 32-128 GPUs run at 128 KB - 32 MB and no 1-2 server log shows) pay it too: NCCL's
    constant + the mean excess of the fitted ones, at least half NCCL's constant. The value stays a prior
    (`determined` false): `nccl/band.py` gives it its range."""
    out = values.copy()
    steps: dict[str, list[int]] = {}
    for j, p in enumerate(params):
        parts = p.name.split(".")
        if parts[1] == "latencies" and parts[4] == "net_step_s":
            steps.setdefault(parts[2], []).append(j)
    for idx in steps.values():
        known = [j for j in idx if active[j]]
        if not known:
            continue
        excess = float(np.mean([values[j] - params[j].prior for j in known]))
        for j in idx:
            if not active[j]:
                out[j] = min(max(params[j].prior + excess, params[j].prior / 2), params[j].upper)
    return out


def source_word(determined: bool, at_bound: bool, value: float, prior: float) -> str:
    """Where a parameter's value comes from, for the calibration's tables."""
    if determined:
        return "fit, at bound" if at_bound else "fit"
    return "prior" if value == prior else "prior + fitted net hop"  # carry_network_hop


def information(residual, values: np.ndarray, params: list[Param], step: float = 1e-3) -> np.ndarray:
    """Sum over rows of (d log-error / d log value)^2 per parameter: how much the rows say about it."""
    return sensitivities(residual, values, params, step)[0]


def sensitivities(log_times, values: np.ndarray, params: list[Param],
                  step: float = 1e-3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per parameter, over the rows of `log_times(values)` (log predicted times, or log errors: the same
    slopes): sum of (d log time / d log value)^2, the max of |d log time / d log value|, and the max of
    |d time / d log value| in seconds. The step goes inwards at a bound."""
    base = log_times(values)
    out = np.zeros((3, len(params)))
    for j, p in enumerate(params):
        h = step if values[j] * math.exp(step) <= p.upper else -step
        moved = values.copy()
        moved[j] = values[j] * math.exp(h)
        slope = (log_times(moved) - base) / h
        if slope.size:
            out[:, j] = (slope ** 2).sum(), np.abs(slope).max(), (np.abs(slope) * np.exp(base)).max()
    return out[0], out[1], out[2]


def _levenberg_marquardt(residual, x0: np.ndarray, step: float = 1e-5):
    x, r = x0.copy(), residual(x0)
    cost, lam = float(r @ r), 1e-2
    jac = np.zeros((r.size, x.size))
    for _ in range(MAX_ITERATIONS):
        for j in range(x.size):
            dx = np.zeros_like(x)
            dx[j] = step
            jac[:, j] = (residual(x + dx) - r) / step
        a, g = jac.T @ jac, jac.T @ r
        improved = False
        while lam < 1e10:
            delta = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
            r_new = residual(x + delta)
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                improved = cost - cost_new > 1e-10 * cost
                x, r, cost, lam = x + delta, r_new, cost_new, max(lam / 3, 1e-9)
                break
            lam *= 4
        if not improved:
            break
    return x, cost


def check(cluster: ClusterModel, runs: list[NcclRun], *, keep=None, fitted: bool = False) -> list[Residual]:
    """Residuals of `runs` under `cluster`. With `fitted`, rows where `keep` is false are marked held out;
    without, every row is held out (the runs were not fitted)."""
    out = []
    for run in runs:
        if run.num_ranks < 2:
            continue
        sizes = [r.size_bytes for r in run.rows]
        times, picks = collective_times(seen_by(cluster, run), run.num_ranks, sizes, run.collective,
                                        gpus_per_process=run.gpus_per_process)
        factor = bus_bandwidth_factor(run.collective, run.num_ranks)
        for row, t, pick in zip(run.rows, times, picks):
            predicted = row.size_bytes / t / 1e9 * factor
            used = fitted and (keep is None or keep(run, row.size_bytes))
            in_err = None
            if row.inplace_time_us:
                in_err = (row.inplace_time_us * 1e-6 / t - 1) * 100
            out.append(Residual(source=run.source, num_gpus=run.num_ranks, num_servers=run.num_servers,
                                size_bytes=row.size_bytes,
                                choice=pick, measured_busbw_GBps=row.busbw_GBps,
                                predicted_busbw_GBps=float(predicted),
                                error_pct=float((row.time_us * 1e-6 / t - 1) * 100),
                                inplace_error_pct=None if in_err is None else float(in_err), held_out=not used,
                                collective=run.collective))
    return out


# The size bands the model is judged on, with their goals (% error of busbw, every row).
BANDS = (("64-512 KB", 64 << 10, 512 << 10, 35.0), ("1-16 MB", 1 << 20, 16 << 20, 25.0),
         (">= 64 MB", 64 << 20, None, 10.0))


def summary(residuals, *, held_out: bool | None = None) -> list[dict]:
    """Per GPU count and size band (the calibration's goals: 64-512 KB within 35 %, 1-16 MB within 25 %,
    >= 64 MB within 10 %):
    rows, max |error| and whether the goal holds. `held_out` picks held-out (True) or fitted rows."""
    rows = [r for r in residuals if held_out is None or r.held_out == held_out]
    out = []
    for gpus in sorted({r.num_gpus for r in rows}):
        for band, lo, hi, goal in BANDS:
            sel = [abs(r.error_pct) for r in rows if r.num_gpus == gpus and r.size_bytes >= lo
                   and (hi is None or r.size_bytes <= hi)]
            if sel:
                worst = float(max(sel))
                out.append({"num_gpus": int(gpus), "band": band, "rows": len(sel), "max_abs_error_pct": worst,
                                "goal_pct": goal, "within_goal": bool(worst <= goal)})
    return out
