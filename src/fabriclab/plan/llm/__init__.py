"""`fabriclab plan --model <LLM>`: which cluster, network and parallel configuration to train an LLM with.

An *option* is a candidate cluster (a preset or a cluster file) with one choice of each variation asked
for: NIC rate per GPU (`server.nic_bandwidth_Bps`), network (`rail` or `fat-tree`) and bisection. For every
option and GPU count the plan searches the parallel configurations the frameworks allow
(`plan/llm/space.py`, within `bounds`: `--tp 4`, `--pp 2-8`): those that do not fit in the GPU's memory
(`workload.memory.check_fits`, as `whatif llm` checks) are dropped without a simulation, the rest are
simulated (`plan/llm/evaluator.py`, the step `fabriclab whatif llm` simulates) in the order of a lower bound of
their step time, until the bound reaches the runner-up's step (so the best and the runner-up are the best
two of all; with `exhaustive` every fitting configuration is simulated) or `max_configs` simulations were
spent (then the row says the search was cut). Every configuration of a plan has the same global batch and
sequence, so the shortest step is the most tokens/s. Each row carries its step's split (compute, the
exposed TP/CP/EP/PP/DP communication, the bubble: what the network costs) and the runner-up configuration;
options whose steps tie are said to tie, and why when the network is hidden (`report.tie_lines`).

Each option's best configuration is priced (`plan/llm/cost.py`: servers + network), the Pareto frontier
of tokens/s against cost is marked over all options and GPU counts (`P`: no other row is as cheap and as
fast, one of them strictly), and per GPU count a sentence recommends the lowest cost per token/s (with a
budget: the fastest within it). Compute comes from the cluster's measured efficiency or an assumption,
and every answer says which (`whatif.llm.run.efficiency_of`).

Default global batch: about 16M tokens a step, `DEFAULT_TOKENS_PER_STEP` / seq rounded to a power of two
sequences (Llama 3 405B on 16K H100s: 2,048 sequences of 8,192 tokens; Dubey et al. 2024, section 3.4.1).

Try it: `fabriclab plan --model llama3-70b --gpus 1024 --clusters dgx-h100 --nic-rates 400Gbps,800Gbps`.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.domains import domain_gpus_used, domain_view, power_of_two_use, with_domain_gpus
from fabriclab.plan.llm.cluster import FABRICS, pcie_lines, vary_cluster
from fabriclab.plan.llm.cost import network_prices, option_cost
from fabriclab.plan.llm.goodput import goodput_lines, goodput_row
from fabriclab.plan.llm.evaluator import Evaluator
from fabriclab.plan.llm.report import mark_pareto, recommend, short, tie_lines
from fabriclab.plan.llm.sizes import describe_sizes, nearest_sizes
from fabriclab.plan.llm.space import SearchBounds, enumerate_configs, fit_configs, memory_needs
from fabriclab.plan.prices import load_prices
from fabriclab.workload.memory import MemoryOptions
from fabriclab.workload.transformer import list_llms, load_model

DEFAULT_CLUSTERS = ("dgx-h100", "hgx-h200")  # the H100-class presets (H200: the same Hopper GPU)
DEFAULT_TOKENS_PER_STEP = 1 << 24
DEFAULT_MAX_CONFIGS = 1000
MAX_LLM_GPUS = 131072  # the largest cluster the library model predicts (nccl/predict at scale)


@dataclass(frozen=True, kw_only=True)
class LlmPlanRequest:
    """An LLM plan's question, lists split and quantities parsed (the CLI builds it)."""

    model: str
    """A built-in LLM (`list_llms()`) or a HuggingFace config.json."""
    gpus: tuple[int, ...]
    """GPU counts, each a multiple of every candidate's GPUs per server."""
    clusters: tuple[tuple[str, ClusterModel], ...]
    """(name as given, cluster) of each candidate."""
    nic_rates_Bps: tuple[float, ...] = ()
    """NIC line rates per GPU to try (bytes/s); empty: each cluster's own."""
    fabrics: tuple[str, ...] = ()
    """Networks to try: rail and/or fat-tree; empty: each cluster's own."""
    bisections: tuple[Fraction, ...] = ()
    """Bisections to try, in (0, 1]; empty: each cluster's own."""
    routings: tuple[str, ...] = ()
    """How flows find a spine, to try: ideal, ecmp, adaptive (`nccl/routing.py`); empty: each cluster's own."""
    seeds: int = 1
    """Draws of ECMP's hashes the best configuration of an option is run over (median and 90th percentile)."""
    gbs: int | None = None
    """Global batch in sequences; None: DEFAULT_TOKENS_PER_STEP / seq as a power of two."""
    seq: int | None = None
    """Sequence length; None: the model's."""
    precision: str = "bf16"
    """bf16 or fp8 matrix math."""
    max_configs: int = DEFAULT_MAX_CONFIGS
    """Most configurations simulated per option and GPU count."""
    exhaustive: bool = False
    """Simulate every fitting configuration (no lower-bound cut): the full table, slower."""
    budget_usd: float | None = None
    """Most the cluster (servers + network) may cost: recommend the fastest within it."""
    prices_path: str | None = None
    """A price table (JSON); None: the shipped one plus `prices.py`'s server and 800G prices."""
    bounds: SearchBounds = SearchBounds()
    """The TP, PP, EP and ZeRO values the search may take (`--tp 4`, `--pp 2-8`)."""
    efficiency: float | None = None
    """A share of peak for every matrix on every cluster (`--efficiency`); None: each cluster's compute."""
    memory: MemoryOptions = MemoryOptions()
    """The gradient buffer and the memory reserve of the memory check."""
    rank: str = "tokens"
    """`tokens`: rank by the step's tokens/s per dollar; `goodput`: also by goodput tokens/s per dollar, with
    dual ToR and spare servers bought where they pay (`plan/llm/goodput.py`)."""


@dataclass(frozen=True, kw_only=True)
class PlanOption:
    """One candidate: a cluster with its variation applied."""

    label: str
    """Short name for tables: `dgx-h100 rail 400G` (bisection added when below 1)."""
    name: str
    """The cluster as the user named it."""
    cluster: ClusterModel
    domain_variant: bool = False
    """Added by the plan: the cluster at a power-of-two use of its NVLink domains (64 of 72), planned only at
    the GPU counts it divides and where placement alone would use the domains otherwise."""

    def runs_at(self, gpus: int) -> bool:
        """Whether the plan takes this option at `gpus` GPUs."""
        if not self.domain_variant:
            return True
        used = self.cluster.server.domain_gpus_used
        auto = domain_gpus_used(replace(self.cluster, server=replace(self.cluster.server, domain_gpus_used=0)), gpus)
        return gpus % used == 0 and auto != used


@dataclass(frozen=True, kw_only=True)
class LlmPlanResult:
    """The plan's rows and what it took."""

    rows: list
    """One dict per (option, GPU count) with a configuration that fits: the best one, priced."""
    configs: list
    """Every simulated configuration (the full table)."""
    unfit: list
    """One dict per (option, GPU count) where nothing fits: the smallest memory need and its configuration."""
    recommendations: list
    """One sentence per GPU count."""
    ties: list = field(default_factory=list)
    """One sentence per GPU count where options' steps tie (`report.tie_lines`)."""
    pcie: list = field(default_factory=list)
    """One sentence per distinct PCIe cap of the options' NICs, naming the options it concerns (`pcie_lines`)."""
    compute: list
    """Per cluster: where its compute efficiency comes from."""
    stats: dict = field(default_factory=dict)
    """Counts (enumerated, fit, simulated, skipped by the bound) and wall time."""


def names_llm(model: str) -> bool:
    """True when `--model` names an LLM: a built-in, or a HuggingFace config.json (a file that is not a
    fabriclab profile, or a folder holding config.json)."""
    name = model.split(",")[0].strip()
    path = Path(name)
    if name in list_llms() or (path.is_dir() and (path / "config.json").is_file()):
        return True
    if not (name.endswith(".json") and path.is_file()):
        return False
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # the profile reader says what is wrong with it
    return isinstance(data, dict) and "grads" not in data  # a profile carries its gradients' ready times


def llm_config_problem(model: str) -> str | None:
    """Why `--model`, a .json file that is no fabriclab profile, does not read as an LLM's config.json (the
    loader's message, naming the file and the key), or None. Such a file is taken for a CNN profile, and an
    LLM option beside it was blamed instead of the file."""
    path = Path(model.split(",")[0].strip())
    if not (path.name.endswith(".json") and path.is_file()):
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if isinstance(data, dict) and "grads" in data:
        return None  # a profile: the CNN plan reads it
    try:
        load_model(str(path))
    except ValueError as exc:
        return str(exc)
    return None


def check_model_names(models: str) -> None:
    """A ValueError naming every kind of model when a name of `--model` is none of them."""
    from fabriclab.workload.profile import V100_BATCH_S
    from fabriclab.workload.zoo import list_models

    for name in (m.strip() for m in models.split(",")):
        if name and Path(name).is_dir():  # an LLM's folder holds config.json (names_llm): this one does not
            raise ValueError(f"--model {name}: the folder has no config.json; give a HuggingFace config.json or "
                             f"a folder holding one")
        if name and name not in V100_BATCH_S and name not in list_models() and not Path(name).exists():
            raise ValueError(f"--model {name!r} is neither a built-in V100 profile ({', '.join(V100_BATCH_S)}), nor "
                             f"a zoo model (`fabriclab models`: {', '.join(list_models()[:4])}, ...), nor an "
                             f"existing file, nor a built-in LLM ({', '.join(list_llms())})")


def default_gbs(seq: int) -> int:
    """About DEFAULT_TOKENS_PER_STEP tokens a step, a power of two sequences (module doc)."""
    return 1 << max(0, round(math.log2(DEFAULT_TOKENS_PER_STEP / seq)))


def _rate_label(rate_Bps: float) -> str:
    return f"{rate_Bps * 8 / 1e9:g}G"


def build_options(request: LlmPlanRequest) -> list[PlanOption]:
    """Every cluster x NIC rate x network x bisection asked for (module doc), each once."""
    bad = [f for f in request.fabrics if f not in FABRICS]
    if bad:
        raise ValueError(f"--fabrics {bad[0]!r}: with an LLM, --fabrics names the network between the servers: "
                         f"{' or '.join(FABRICS)} (the NIC rate per GPU is --nic-rates, e.g. 400Gbps,800Gbps)")
    if not request.clusters:
        raise ValueError("give at least one cluster (--clusters dgx-h100,hgx-h200 or a cluster file)")
    options, seen = [], set()
    for name, base in request.clusters:
        for rate in request.nic_rates_Bps or (base.server.nic_bandwidth_Bps,):
            for fabric in request.fabrics or (base.network.fabric,):
                for ratio, routing in itertools.product(
                        request.bisections or (Fraction(base.network.bisection).limit_denominator(64),),
                        request.routings or (base.network.routing,)):
                    key = (name, rate, fabric, ratio, routing)
                    if key in seen:
                        continue
                    seen.add(key)
                    cluster = vary_cluster(base, nic_rate_Bps=rate, fabric=fabric, bisection=ratio, routing=routing)
                    label = (f"{name} {fabric} {_rate_label(rate)}" + ("" if ratio == 1 else f" {ratio}")
                             + ("" if routing == "ideal" else f" {routing}"))
                    options.append(PlanOption(label=label, name=name, cluster=cluster))
                    used = 0 if base.server.domain_gpus_used else power_of_two_use(base)
                    if used and any(domain_gpus_used(cluster, n) != used for n in request.gpus if n % used == 0):
                        # NVL72 racks are also run at 64 GPUs each, which keeps power-of-two groups whole
                        options.append(PlanOption(label=f"{label} {used}/domain", name=name,
                                                  cluster=with_domain_gpus(cluster, used), domain_variant=True))
    return options


def _check_gpus(request: LlmPlanRequest, options: list[PlanOption], nearest) -> None:
    """A ValueError for GPU counts the options cannot place, with the `nearest(gpus)` sizes that divide."""
    if not request.gpus:
        raise ValueError("give at least one GPU count, e.g. --gpus 1024")
    if request.gpus[-1] > MAX_LLM_GPUS:
        raise ValueError(f"--gpus {request.gpus[-1]}: at most {MAX_LLM_GPUS:,} GPUs")
    for option in options:
        g = option.cluster.server.gpus_per_server
        bad = [n for n in request.gpus if n % g]
        if bad:
            raise ValueError(f"--gpus {bad[0]} is not a multiple of {g}: {option.name} has {g} GPUs per server "
                             f"and a plan fills whole servers; nearest sizes that divide: {nearest(bad[0])}")
        for n in request.gpus:  # GPUs that fill no whole trays of each NVLink domain fail here, by name
            if option.runs_at(n):
                try:
                    domain_view(option.cluster, n)
                except ValueError as exc:
                    raise ValueError(f"{exc}; nearest sizes that divide: {nearest(n)}") from None


class LlmPlanWork:
    """What every point of an LLM plan needs (pickled once per run); the caches it fills are per process."""

    def __init__(self, spec, request: LlmPlanRequest, options: list[PlanOption], gbs: int, seq: int) -> None:
        self.spec, self.request, self.options, self.gbs, self.seq = spec, request, options, gbs, seq
        self.table, self.shipped = load_prices(request.prices_path), request.prices_path is None
        self.progress = None
        self._caches()

    def _caches(self) -> None:
        self.memo: dict = {}  # communicator groups per parallel shape: the same on every cluster
        self.evaluators: dict = {}
        self.enumerated: dict = {}  # (GPUs, GPUs per server) -> the configurations and their memory

    def __getstate__(self) -> dict:
        return {k: self.__dict__[k] for k in ("spec", "request", "options", "gbs", "seq", "table", "shipped")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, progress=None)
        self._caches()

    def evaluator(self, k: int) -> Evaluator:
        """The Evaluator of option `k`, built once per process (over the draws with `--seeds`)."""
        if k not in self.evaluators:
            from fabriclab.nccl.routing import draws

            from fabriclab.whatif.llm.step import StepOptions

            options = StepOptions(grad_bytes=self.request.memory.grad_bytes)  # the DP reductions' bytes too
            evs = [Evaluator(self.spec, c, options=options, memo=self.memo, efficiency=self.request.efficiency)
                   for c in draws(self.options[k].cluster, self.request.seeds)]
            self.evaluators[k] = evs[0] if len(evs) == 1 else DrawnEvaluator(evs)
        return self.evaluators[k]


def llm_points(request: LlmPlanRequest, options: list[PlanOption]) -> list[tuple[int, int]]:
    """The plan's points: (GPU count, option index), GPU counts first."""
    return [(gpus, k) for gpus in request.gpus for k in range(len(options)) if options[k].runs_at(gpus)]


def llm_point(work: LlmPlanWork, point: tuple[int, int]) -> dict:
    """One option at one GPU count: the configurations that fit, searched (`search`), the best priced."""
    gpus, k = point
    option, ev, request, progress = work.options[k], work.evaluator(k), work.request, work.progress
    g = domain_view(option.cluster, gpus).server.gpus_per_server  # TP, CP and EP may span the NVLink domain
    if progress:
        progress(f"{option.label}, {gpus:,} GPUs: memory and lower bounds of the configurations")
    if (gpus, g) not in work.enumerated:
        space = enumerate_configs(work.spec, gpus, g, gbs=work.gbs, seq=work.seq, precision=request.precision,
                                  bounds=request.bounds)
        work.enumerated[(gpus, g)] = (space, memory_needs(work.spec, space, request.memory))
    fitted = fit_configs(*work.enumerated[(gpus, g)], ev.gpu.memory_bytes, request.memory.reserve_bytes)
    counts = {"enumerated": fitted.num_enumerated, "fit": len(fitted.configs), "simulated": 0, "bounded": 0}
    where = {"option": option.label, "cluster": option.name, "gpus": gpus}
    if not fitted.configs:
        return {"rows": [], "configs": [], "unfit": [{**where, **_smallest(fitted, ev)}], "counts": counts}
    found = search(ev, fitted.configs, request, lambda i, n: progress and progress(
        f"{option.label}, {gpus:,} GPUs: configuration {i:,} of {n:,} that fit"))
    counts["simulated"], counts["bounded"] = len(found["answers"]), found["bounded"]
    ranked = sorted(found["answers"], key=lambda ab: (ab[0].step_time_s, ab[0].memory.total_bytes))
    row = {**where, **_best_row(ranked[0][0], option, fitted, found), **fabric_costs(work, k, ranked[0][0]),
           **_runner_up(ranked[0][0], ranked[1][0] if len(ranked) > 1 else None),
           **option_cost(option.cluster, gpus, work.table, shipped=work.shipped)}
    if request.rank == "goodput":  # the step's best configuration: a checkpoint weighs the same in every one
        row.update(goodput_row(ranked[0][0], option.cluster, row, network_prices(option.cluster, work.table)[0]))
    return {"rows": [row], "configs": [{**where, **_config_row(a, b)} for a, b in found["answers"]], "unfit": [],
            "counts": counts}


def run_llm_plan(request: LlmPlanRequest, progress=None, run_points=None) -> LlmPlanResult:
    """Search, price and rank every option (module doc); `progress(text)` is told what runs now (here only).
    `run_points(fn, work, points)` returns `[fn(work, p) for p in points]` in order, wherever it runs them."""
    t0 = time.perf_counter()
    spec = load_model(request.model)
    seq = request.seq or spec.seq_length
    gbs = request.gbs or default_gbs(seq)
    options = build_options(request)

    def nearest(gpus: int) -> str:
        return describe_sizes(nearest_sizes(spec, request.clusters, gpus, gbs=gbs, seq=seq, bounds=request.bounds))

    _check_gpus(request, options, nearest)
    work = LlmPlanWork(spec, request, options, gbs, seq)
    work.progress = progress if run_points is None else None
    run_points = run_points or (lambda fn, context, points: [fn(context, p) for p in points])
    parts = run_points(llm_point, work, llm_points(request, options))
    rows, configs, unfit = ([x for part in parts for x in part[key]] for key in ("rows", "configs", "unfit"))
    counts = {k: sum(part["counts"][k] for part in parts) for k in ("enumerated", "fit", "simulated", "bounded")}
    _no_rows(rows, unfit, spec.name, request.bounds, gbs, nearest)
    for r in rows:
        r["usd_per_token_per_s"] = r["cluster_usd"] / r["tokens_per_s"]
    mark_pareto(rows)
    stats = {**{f"num_{k}": v for k, v in counts.items()}, "num_options": len(options), "model": spec.name,
             "gbs": gbs, "seq": seq, "wall_s": time.perf_counter() - t0}
    evaluators = [work.evaluator(k) for k in range(len(options))]
    return LlmPlanResult(rows=rows, configs=configs, unfit=unfit, stats=stats,
                         compute=_compute(options, evaluators, request.precision),
                         recommendations=recommend(rows, unfit, spec.name, request.budget_usd)
                         + (goodput_lines(rows, spec.name) if request.rank == "goodput" else []),
                         ties=tie_lines(rows),
                         pcie=pcie_lines([(o.label, o.name, o.cluster) for o in options]))


def _compute(options: list[PlanOption], evaluators: list[Evaluator], precision: str) -> list[dict]:
    """Per cluster: the compute efficiency the plan used and where it comes from."""
    out: dict = {}
    for option, ev in zip(options, evaluators):
        e = ev.efficiency(precision)
        out.setdefault(option.name, {"cluster": option.name, "source": e.source, "measured": e.measured,
                                     "value": e.value})
    return list(out.values())


def search(ev: Evaluator, fitted: list, request: LlmPlanRequest, progress=None) -> dict:
    """Simulate the fitting configurations by increasing compute bound; skip one whose tighter bound
    (`Evaluator.lower_bound_s`) reaches the runner-up's step (the second best found), stop when the compute
    bound does (every one with `request.exhaustive`); at most `request.max_configs` simulations. Returns the
    (answer, bound) pairs, how many the bounds skipped and whether `max_configs` cut the search."""
    cheap = [ev.compute_bound_s(par) for par, _ in fitted]
    order = sorted(range(len(fitted)), key=lambda i: (cheap[i], i))
    answers, best, bounded, cut = [], math.inf, 0, False
    two = [math.inf, math.inf]  # the best two steps found
    for k, i in enumerate(order):
        if not request.exhaustive and cheap[i] >= best:
            bounded += len(order) - k
            break
        bound = cheap[i] if request.exhaustive else ev.lower_bound_s(fitted[i][0])
        if not request.exhaustive and bound >= best:
            bounded += 1
            continue
        if len(answers) >= request.max_configs:
            cut = True
            break
        answer = ev.simulate(*fitted[i])
        answers.append((answer, bound))
        two = sorted([*two, answer.step_time_s])[:2]
        best = two[1]  # a configuration must beat the runner-up to matter
        if progress:
            progress(k + 1, len(order))
    return {"answers": answers, "bounded": bounded, "cut": cut}


def _config_row(answer, bound_s: float) -> dict:
    p = answer.par
    return {"parallel": short(p), "tp": p.tp, "pp": p.pp, "vp": p.vp, "cp": p.cp, "ep": p.ep, "etp": p.etp, "dp": p.dp,
            "tp_overlap": answer.result.model.options.tp_overlap,
            "mbs": p.mbs, "zero": p.zero, "recompute": p.recompute, "step_time_s": answer.step_time_s,
            "tokens_per_s": answer.tokens_per_s, "mfu": answer.mfu, "memory_per_gpu_bytes": answer.memory.total_bytes,
            "lower_bound_s": bound_s}


def _best_row(answer, option: PlanOption, fitted, found: dict) -> dict:
    c = option.cluster
    return {**_config_row(answer, math.nan), "description": answer.par.describe(), "gpu": answer.gpu_name,
            "gbs": answer.par.gbs, "seq": answer.par.seq, "precision": answer.par.precision,
            "fabric": c.network.fabric, "nic_Gbps": c.server.nic_bandwidth_Bps * 8 / 1e9,
            "bisection": c.network.bisection, "split_s": answer.result.split_s,
            "efficiency": answer.efficiency.value, "efficiency_source": answer.efficiency.source,
            "efficiency_measured": answer.efficiency.measured, "compute_model": answer.efficiency.model,
            "num_enumerated": fitted.num_enumerated,
            "num_fit": len(fitted.configs), "num_simulated": len(found["answers"]),
            "num_bounded": found["bounded"], "search_cut": found["cut"],
            "memory_warning": answer.memory.fit.warning if answer.memory.fit is not None else None}


def _runner_up(best, second) -> dict:
    """The second-best configuration of a row and how much longer its step is."""
    if second is None:
        return {"runner_up": None, "runner_up_step_s": math.nan, "runner_up_slower": math.nan,
                "runner_up_split_s": None}
    return {"runner_up": short(second.par), "runner_up_step_s": second.step_time_s,
            "runner_up_slower": second.step_time_s / best.step_time_s - 1, "runner_up_split_s": second.result.split_s}


def fabric_costs(work: LlmPlanWork, k: int, answer) -> dict:
    """The best configuration over the draws of the hashes and servers (`--seeds`: the median and 90th
    percentile of its step; `answer` is its draw at the median, `DrawnEvaluator`) and what routing and
    congestion control add to that draw's flow-model step (`nccl/routing.py`, `nccl/congestion.py`): the
    same configuration with the routing ideal and the transport ideal, then with the routing alone."""
    from fabriclab.nccl.routing import median_p90

    ev = work.evaluator(k)
    steps = ev.steps(answer.par) if isinstance(ev, DrawnEvaluator) else [answer.step_time_s]
    median, p90 = (float(v) for v in median_p90(steps))
    cluster = answer.cluster
    n = cluster.network

    def step(network) -> float:
        c = replace(cluster, network=network)
        return Evaluator(work.spec, c, memo=work.memo, efficiency=work.request.efficiency).simulate(answer.par).step_time_s

    flow = answer.step_time_s if (n.routing, n.transport) == ("ideal", "ideal") else step(
        replace(n, routing="ideal", transport="ideal"))
    routed = answer.step_time_s if n.transport == "ideal" else step(replace(n, transport="ideal"))
    return {"routing": n.routing, "transport": n.transport, "step_time_s_median": median, "step_time_s_p90": p90,
            "flow_model_step_s": flow, "routing_cost_s": routed - flow, "congestion_cost_s": answer.step_time_s - routed}


class DrawnEvaluator:
    """An option's Evaluator over the draws of its hashes and servers (`plan --seeds N` on an ECMP or
    scattered fabric): a configuration's answer is its draw at the median (the upper middle of an even
    count: a planner does not bet on the lucky draw), its lower bound the least of the draws' (a bound on
    each of them), so the search ranks configurations by their typical step."""

    def __init__(self, evaluators: list[Evaluator]) -> None:
        self.evaluators = evaluators
        self._answers: dict = {}

    def __getattr__(self, name: str):
        return getattr(self.evaluators[0], name)

    def compute_bound_s(self, par) -> float:
        return self.evaluators[0].compute_bound_s(par)  # compute alone: the same on every draw

    def lower_bound_s(self, par) -> float:
        return min(ev.lower_bound_s(par) for ev in self.evaluators)

    def _all(self, par, memory=None) -> list:
        key = par.describe()
        if key not in self._answers:
            self._answers[key] = [ev.simulate(par, memory) for ev in self.evaluators]
        return self._answers[key]

    def steps(self, par) -> list[float]:
        return [a.step_time_s for a in self._all(par)]

    def simulate(self, par, memory=None):
        answers = self._all(par, memory)
        order = sorted(range(len(answers)), key=lambda i: (answers[i].step_time_s, i))
        return answers[order[len(answers) // 2]]


def _smallest(fitted, ev: Evaluator) -> dict:
    need, par = fitted.smallest if fitted.smallest else (math.nan, None)
    return {"num_enumerated": fitted.num_enumerated, "smallest_need_bytes": need,
            "gpu_memory_bytes": ev.gpu.memory_bytes, "smallest_parallel": None if par is None else par.describe()}


def _no_rows(rows: list, unfit: list, model: str, bounds: SearchBounds, gbs: int, nearest) -> None:
    if rows:
        return
    if bounds.describe() and not any(u["num_enumerated"] for u in unfit):
        raise ValueError(f"{model}: no parallel configuration the frameworks allow has {bounds.describe()} at "
                         f"these GPU counts (TP 1, 2, 4, 8 (up to 72 in an NVLink domain) dividing the heads, PP up to 32, EP dividing the "
                         f"experts): widen them")
    if not any(u["smallest_parallel"] for u in unfit):
        counts = sorted({u["gpus"] for u in unfit})
        raise ValueError(f"{model}: no parallel configuration divides {' or '.join(f'{n:,}' for n in counts)} GPUs "
                         f"with a global batch of {gbs:,}; nearest sizes that divide: {nearest(counts[0])}")
    u = min((u for u in unfit if u["smallest_parallel"]),
            key=lambda u: u["smallest_need_bytes"] / u["gpu_memory_bytes"])
    raise ValueError(f"{model} fits no configuration on any option: the smallest need found is "
                     f"{u['smallest_need_bytes'] / 1e9:.1f} GB per GPU of {u['gpu_memory_bytes'] / 1e9:.0f} GB "
                     f"({u['smallest_parallel']}, {u['option']}, {u['gpus']:,} GPUs): give more GPUs, a shorter "
                     f"--seq or a smaller --gbs")
