"""Goodput of an LLM job on a cluster option, and what buying reliability costs: dual ToR, spare servers.

`job_components` counts a job's parts as its price counts them (`plan/cluster.cluster_bill`: NICs, leaves,
spines, cables) plus the NVLink switch trays of rack-scale domains (one per 8 GPUs of a domain: an NVL72
rack's 9). `answer_goodput` is the goodput of a simulated step (`whatif/goodput/goodput.py`), what `whatif
llm` prints.

`plan --rank goodput` prices reliability and buys what pays (`best_resilience`). A planned cluster is
dedicated: a failed server is replaced from the spares bought with it, or the job waits for the repair.
Per option and GPU count it tries dual ToR (no, yes) and spare servers (none, then 1, 2, 4, ... units up
to an eighth of the job; a unit is a server, or a whole NVLink domain's trays where a failed tray stops the
domain) and keeps the choice with the most goodput tokens/s per dollar. Their prices:

* dual ToR (Alibaba HPN): a second leaf per leaf, whole switches of the fabric's radix at its port price,
  and a second NIC-leaf cable per NIC (the NICs' second port is taken as part of the NIC);
* a spare unit: its share of the option's cluster price (servers with their NICs, leaf ports and cables);
* spine spare capacity (a cluster file's `resilience.spine_spare`): that share more of the switch-to-switch
  cables and their two ports each.

A cluster file whose `resilience` names spares or dual ToR keeps its choice (priced as above: the option's
own price counts one ToR and no spares).

Try it: `fabriclab plan --model llama3-405b --gpus 65536 --clusters dgx-h100 --tp 8 --pp 16 --seq 8192 --rank goodput`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.domains import domain_gpus_used, domain_size, library_spans_domain, spans_servers
from fabriclab.fabric.resilience import ResilienceSpec
from fabriclab.plan.cluster import cluster_bill
from fabriclab.whatif.goodput.checkpoint import CheckpointPolicy, checkpoint_of
from fabriclab.whatif.goodput.domains import Components
from fabriclab.whatif.goodput.goodput import Goodput, goodput
from fabriclab.whatif.goodput.rates import LLAMA3

NETWORK_PARTS = ("cp", "ep", "pp", "dp")  # exposed communication that crosses servers
GPUS_PER_NVLINK_TRAY = 8  # GB200 NVL72: 9 NVLink switch trays for 72 GPUs (NVIDIA GB200 NVL72 spec sheet)
SPARE_SHARE = 1 / 8  # the most spares the plan tries, as a share of the job's servers


def _leaves(cluster: ClusterModel, servers: int, ports: int) -> int:
    """Leaves of `ports` NIC ports for the job's NICs (rail: per rail; plain: over all NICs)."""
    k = cluster.server.nics_per_server
    if cluster.network.fabric == "rail":
        return k * math.ceil(servers / ports)
    return math.ceil(servers * k / ports)


def leaf_ports(cluster: ClusterModel, servers: int, bill, levels: int) -> int:
    """The NIC ports of each leaf of `bill`: the cluster's leaf ports, or the wider leaves a tree of the
    switches' radix takes to keep two levels (`plan/cluster.cluster_bill`), found as the port count whose
    leaves and spines are the bill's (three levels keep the cluster's leaves)."""
    ports, ratio = cluster.network.leaf_ports, cluster.network.bisection
    if levels != 2 or not bill.radix:
        return ports
    for down in range(ports, bill.radix):
        leaves = _leaves(cluster, servers, down)
        links = leaves * max(1, round(down * ratio))
        if bill.num_switch_cables == links and bill.num_switches == leaves + math.ceil(links / bill.radix):
            return down
    return ports


def job_components(cluster: ClusterModel, gpus: int, par=None) -> Components:
    """The parts of a job of `gpus` GPUs (trained as `par`, whose groups may span an NVLink domain) on
    `cluster` (module doc)."""
    s = cluster.server
    servers = max(1, gpus // s.gpus_per_server)
    bill, levels = cluster_bill(cluster, servers)
    ports, k = leaf_ports(cluster, servers, bill, levels), s.nics_per_server
    leaves = 1 if levels == 1 else min(_leaves(cluster, servers, ports), bill.num_switches)
    per_leaf = min(servers, ports) if cluster.network.fabric == "rail" else max(1, min(servers, ports // k))
    spans = spans_servers(cluster) and library_spans_domain(cluster)
    domain, used = domain_size(s), (domain_gpus_used(cluster, gpus) if spans else s.gpus_per_server)
    extent = 1 if par is None else max(par.tp * par.cp, par.tp * par.ep)
    racks = -(-gpus // used) if spans else 0
    net = servers > 1 and not (spans and gpus <= used)  # a job inside one server or domain uses no network
    return Components(num_gpus=gpus, num_servers=servers, num_nics=servers * k if net else 0,
                      num_leaves=leaves if net else 0,
                      num_spine_switches=bill.num_switches - leaves if levels > 1 and net else 0,
                      num_switch_cables=bill.num_switch_cables if net else 0, servers_per_leaf=per_leaf,
                      num_nvlink_trays=racks * max(1, domain // GPUS_PER_NVLINK_TRAY) if spans else 0,
                      servers_per_domain=domain // s.gpus_per_server if spans else 1,
                      spans_domain=spans and (par is None or extent > s.gpus_per_server),
                      domain_has_spare_trays=spans and used < domain)


def network_share(answer) -> float:
    """The share of the step that is exposed communication between servers."""
    split = answer.result.split_s
    return sum(split.get(k, 0.0) for k in NETWORK_PARTS) / answer.step_time_s


def answer_goodput(answer, cluster: ClusterModel, *, policy: CheckpointPolicy = CheckpointPolicy(), rates=LLAMA3,
                   resilience: ResilienceSpec | None = None) -> Goodput:
    """The goodput of `answer` (a simulated step, `whatif.llm.run.LlmAnswer`) on `cluster` (the cluster as
    given, not its NVLink domain view); `resilience`: instead of the cluster's."""
    comps = job_components(cluster, answer.par.num_gpus, answer.par)
    ckpt = checkpoint_of(answer.spec, answer.par, answer.memory, cluster, policy)
    return goodput(components=comps, rates=rates, resilience=resilience or cluster.resilience, checkpoint=ckpt,
                   policy=policy, tokens_per_s=answer.tokens_per_s, step_s=answer.step_time_s,
                   network_share=network_share(answer))


@dataclass(frozen=True, kw_only=True)
class ResilienceChoice:
    """One way to buy reliability for a plan row, its price and its goodput."""

    resilience: ResilienceSpec
    """Dual ToR, spare servers (spine spare: the cluster's)."""
    extra_usd: float
    """What it adds to the option's price."""
    goodput: Goodput
    """The row's goodput with it."""
    cluster_usd: float
    """The option's price with it."""

    @property
    def usd_per_goodput(self) -> float:
        g = self.goodput.goodput_tokens_per_s
        return self.cluster_usd / g if g > 0 else math.inf

    def describe(self) -> str:
        r = self.resilience
        n = r.spare_servers or 0
        parts = (["dual ToR"] if r.dual_tor else []) + [f"{n:,} spare server{'' if n == 1 else 's'}"]
        return ", ".join(parts)


def extra_usd(cluster: ClusterModel, row: dict, comps: Components, resilience: ResilienceSpec, prices) -> float:
    """What dual ToR, the spare servers and the spine spare of `resilience` add to `row`'s price (module
    doc); `prices`: the option's FabricPrices."""
    usd = 0.0
    if resilience.dual_tor:
        usd += comps.num_leaves * (row.get("switch_radix") or 0) * prices.switch_port.usd
        usd += comps.num_nics * prices.host_cable.usd
    if resilience.spare_servers:
        usd += resilience.spare_servers * row["cluster_usd"] / row["servers"]
    if resilience.spine_spare:
        usd += resilience.spine_spare * comps.num_switch_cables * (prices.switch_cable.usd + 2 * prices.switch_port.usd)
    return usd


def spare_ladder(comps: Components) -> list[int]:
    """The spare servers the plan tries: none, then 1, 2, 4, ... units up to SPARE_SHARE of the job."""
    unit = comps.servers_per_failure or 1
    most = max(unit, int(comps.num_servers * SPARE_SHARE))
    out, k = [0], 1
    while k * unit <= most:
        out.append(k * unit)
        k *= 2
    return out


def resilience_choices(answer, cluster: ClusterModel, row: dict, prices, *,
                       policy: CheckpointPolicy = CheckpointPolicy(), rates=LLAMA3) -> list[ResilienceChoice]:
    """Every choice the plan tries for a row (module doc), in the order tried."""
    comps = job_components(cluster, answer.par.num_gpus, answer.par)
    ckpt = checkpoint_of(answer.spec, answer.par, answer.memory, cluster, policy)
    own = cluster.resilience
    duals = (True,) if own.dual_tor else (False, True)
    spares = [own.spare_servers] if own.spare_servers is not None else spare_ladder(comps)
    share = network_share(answer)
    out = []
    for dual in duals:
        for k in spares:
            r = replace(own, dual_tor=dual, spare_servers=k)
            g = goodput(components=comps, rates=rates, resilience=r, checkpoint=ckpt, policy=policy,
                        tokens_per_s=answer.tokens_per_s, step_s=answer.step_time_s, network_share=share)
            usd = extra_usd(cluster, row, comps, r, prices)  # the option's price holds none of them
            out.append(ResilienceChoice(resilience=r, extra_usd=usd, goodput=g, cluster_usd=row["cluster_usd"] + usd))
    return out


def best_resilience(choices: list[ResilienceChoice]) -> ResilienceChoice:
    """The choice with the most goodput per dollar (ties: the cheaper)."""
    return min(choices, key=lambda c: (c.usd_per_goodput, c.cluster_usd))


def _option(label: str, c: ResilienceChoice) -> dict:
    return {"choice": label, "dual_tor": c.resilience.dual_tor, "spare_servers": c.resilience.spare_servers,
            "extra_usd": c.extra_usd, "effective_training_time": c.goodput.effective_training_time,
            "goodput_tokens_per_s": c.goodput.goodput_tokens_per_s, "usd_per_goodput_token_per_s": c.usd_per_goodput}


def goodput_row(answer, cluster: ClusterModel, row: dict, prices, **kwargs) -> dict:
    """The goodput columns of a plan row (`plan --rank goodput`): the best choice's goodput and price, and
    for the decision's arithmetic the cluster as it stands (no dual ToR unless it has one, no spares unless
    it names them), the best with one ToR and the best with two."""
    choices = resilience_choices(answer, cluster, row, prices, **kwargs)
    best = best_resilience(choices)
    built = choices[0]  # the cluster's own ToRs with the fewest spares tried
    sides = [(f"{'dual' if d else 'single'} ToR", best_resilience([c for c in choices if c.resilience.dual_tor == d]))
             for d in sorted({c.resilience.dual_tor for c in choices})]
    g = best.goodput
    return {**{k: v for k, v in g.record().items() if k != "interruptions_by_kind_per_day"},
            "resilience": best.describe(), "dual_tor": best.resilience.dual_tor,
            "spare_servers": best.resilience.spare_servers, "resilience_usd": best.extra_usd,
            "goodput_cluster_usd": best.cluster_usd, "usd_per_goodput_token_per_s": best.usd_per_goodput,
            "resilience_options": [_option("as built", built)] + [_option(label, c) for label, c in sides]}


def _money(usd: float) -> str:
    return f"${usd / 1e9:,.2f}B" if usd >= 1e9 else f"${usd / 1e6:,.1f}M" if usd >= 1e6 else f"${usd:,.0f}"


def _every(seconds: float) -> str:
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:.3g} s"


def goodput_lines(rows: list[dict], model: str) -> list[str]:
    """Per GPU count: the row with the most goodput per dollar, with what it keeps and buys, and the row the
    step alone would pick where it is another; then per row (`#` as in the plan's tables) what reliability
    buys: the cluster as built, the best with one ToR and with two."""
    out = []
    for gpus in sorted({r["gpus"] for r in rows}):
        group = [r for r in rows if r["gpus"] == gpus and "goodput_tokens_per_s" in r]
        if not group:
            continue
        best = min(group, key=lambda r: (r["usd_per_goodput_token_per_s"], -r["goodput_tokens_per_s"]))
        step = min(group, key=lambda r: (r["cluster_usd"] / r["tokens_per_s"], -r["tokens_per_s"]))
        text = (f"{model} at {gpus:,} GPUs by goodput per dollar: {best['option']} with {best['parallel']} and "
                f"{best['resilience']}: {best['goodput_tokens_per_s']:,.0f} of its {best['tokens_per_s']:,.0f} "
                f"tokens/s kept (effective training time {best['effective_training_time']:.1%}, "
                f"{best['interruptions_per_day']:.3g} interruptions a day, a checkpoint every "
                f"{_every(best['checkpoint_interval_s'])}), {_money(best['goodput_cluster_usd'])} "
                f"(${best['usd_per_goodput_token_per_s']:,.1f} per goodput token/s)")
        if step is not best:
            text += (f"; by the step alone {step['option']} (${step['cluster_usd'] / step['tokens_per_s']:,.1f} per "
                     f"token/s; ${step['usd_per_goodput_token_per_s']:,.1f} per goodput token/s)")
        out.append(text)
    return out + [line for i, r in enumerate(rows, 1) for line in _decision_line(i, r)]


def _decision_line(i: int, row: dict) -> list[str]:
    """What reliability buys for one row (goodput_row's options), the cheapest per goodput token/s last."""
    options = row.get("resilience_options") or []
    if not options:
        return []
    parts = [f"{o['choice']}" + (f" + {o['spare_servers'] or 0:,} spares" if o["choice"] != "as built" else
                                 f" ({o['spare_servers'] or 0:,} spares)")
             + f" +{_money(o['extra_usd'])}: ETT {o['effective_training_time']:.2%}, " + _per(o) for o in options]
    best = min(options[1:] or options, key=lambda o: o["usd_per_goodput_token_per_s"])
    return [f"#{i} at {row['gpus']:,} GPUs, $ per goodput token/s: " + "; ".join(parts)
            + f"; best: {best['choice']} with {best['spare_servers'] or 0:,} spares"]


def _per(option: dict) -> str:
    """`$684.0` per goodput token/s, or why there is none to speak of."""
    if option["effective_training_time"] < 1e-3:
        return "no goodput (each failure waits for a repair)"
    return f"${option['usd_per_goodput_token_per_s']:,.1f}"
