"""The LLM plan's judgement: the Pareto frontier of tokens/s against cost, and one recommendation per GPU count.

A row (an option's best configuration at a GPU count) is on the frontier when no other row of the plan,
at any GPU count, costs as little or less and trains as fast or faster, one of the two strictly: buying
more GPUs is one of the choices. Per GPU count the recommendation is the row with the lowest cost per
token/s (cluster cost / tokens/s; ties to the faster), and the fastest row when it is another; with a
budget, the fastest row within it. Every sentence carries the compute assumption when there is one.

Options whose best steps lie within TIE_REL of the fastest at a GPU count tie (`tie_lines`): the
simulator cannot tell them apart, so price decides. When each of them also exposes less than HIDDEN_SHARE of
its step as communication, the line says the network is hidden: a faster or fuller network buys nothing
there.

Try it: `fabriclab plan --model llama3-8b --gpus 64,128 --clusters dgx-h100 --nic-rates 400Gbps,800Gbps`.
"""

from __future__ import annotations

# Steps closer than this tie: the step simulator's own choices (message sizes, the library's algorithm
# switch points) move a step by more (plan/llm/evaluator lower bounds are exact only to the schedule's order)
TIE_REL = 0.005
HIDDEN_SHARE = 0.01  # exposed TP/CP/EP/PP/DP communication below 1 % of the step: the network is hidden
NETWORK_PARTS = ("tp", "cp", "ep", "pp", "dp")
SERVER_PARTS = ("cp", "ep", "pp", "dp")  # those that may cross servers (TP stays inside one)


def exposed_share(row: dict, parts: tuple[str, ...] = NETWORK_PARTS) -> float:
    """The share of a row's step spent in exposed communication of `parts` (the network's cost)."""
    return sum(row["split_s"].get(k, 0.0) for k in parts) / row["step_time_s"]


def short(par) -> str:
    """A configuration in a table cell: `TP8 PP16 VP2 CP2 EP8 DP64 mbs1 Z1 sel`."""
    parts = [f"TP{par.tp}", f"PP{par.pp}"] + ([f"VP{par.vp}"] if par.vp > 1 else [])
    parts += ([f"CP{par.cp}"] if par.cp > 1 else []) + ([f"EP{par.ep}"] if par.ep > 1 else [])
    parts += [f"ETP{par.etp}"] if par.etp > 1 else []
    recompute = {"none": "", "selective": " sel", "full": " full"}[par.recompute]
    return " ".join(parts) + f" DP{par.dp} mbs{par.mbs} Z{par.zero}{recompute}"


def mark_pareto(rows: list[dict]) -> None:
    """Set `pareto` on each row (module doc)."""
    for a in rows:
        a["pareto"] = not any(
            b is not a and b["cluster_usd"] <= a["cluster_usd"] and b["tokens_per_s"] >= a["tokens_per_s"]
            and (b["cluster_usd"] < a["cluster_usd"] or b["tokens_per_s"] > a["tokens_per_s"]) for b in rows)


def _money(usd: float) -> str:
    return f"${usd / 1e6:,.2f}M" if usd >= 1e6 else f"${usd:,.0f}"


def short_money(usd: float) -> str:
    """Dollars in a table cell: `$63.4M`, `$1,234.5M`, `$850.0k`, `$950` (a number never cut, only scaled)."""
    if abs(usd) >= 1e6:
        return f"${usd / 1e6:,.1f}M"
    return f"${usd / 1e3:,.1f}k" if abs(usd) >= 1e4 else f"${usd:,.0f}"


def bought(row: dict) -> str:
    """What a row's GPUs come in: `128 racks of 72` (NVLink domains bought whole) or `1,024 servers of 8`."""
    if row.get("domains_bought"):
        n = row["domains_bought"]
        return f"{n:,} rack{'s' if n > 1 else ''} of {row['domain_gpus']}"
    n = row["servers"]
    return f"{n:,} server{'s' if n > 1 else ''} of {row['gpus_bought'] // max(1, n)}"


def communication_usd(row: dict) -> float:
    """The share of a row's step its exposed communication takes, as dollars of the cluster's price: what the
    GPUs bought for that time cost (`exposed_share` x cluster cost)."""
    return exposed_share(row) * row["cluster_usd"]


def describe(row: dict) -> str:
    """`dgx-h100 rail 400G with TP8 PP16 DP128 mbs1 Z1: 2,090,000 tokens/s, MFU 36.1%, $701.0M`."""
    return (f"{row['option']} with {row['parallel']}: {row['tokens_per_s']:,.0f} tokens/s, MFU {row['mfu']:.1%}, "
            f"{_money(row['cluster_usd'])} (${row['usd_per_token_per_s']:,.1f} per token/s)")


def _assumed(rows: list[dict]) -> str:
    if all(r["efficiency_measured"] for r in rows):
        return ""
    if all(r.get("compute_model") == "kernels" for r in rows):
        return " [compute: kernels by shape as measured alone; the step's own overheads not calibrated]"
    return (f" [compute assumed at {rows[0]['efficiency']:.0%} of peak, not measured: tokens/s scale with it]"
            if len({r["efficiency"] for r in rows}) == 1 else " [compute partly assumed, not measured]")


def recommend(rows: list[dict], unfit: list[dict], model: str, budget_usd: float | None) -> list[str]:
    """One sentence per GPU count (module doc), in the order of the GPU counts."""
    out = []
    for gpus in sorted({*(r["gpus"] for r in rows), *(u["gpus"] for u in unfit)}):
        group = [r for r in rows if r["gpus"] == gpus]
        head = f"{model} at {gpus:,} GPUs: "
        if not group:
            out.append(head + "fits on no option (see the memory notes)")
            continue
        cheapest = min(group, key=lambda r: (r["usd_per_token_per_s"], -r["tokens_per_s"]))
        fastest = max(group, key=lambda r: (r["tokens_per_s"], -r["cluster_usd"]))
        if budget_usd is not None:
            within = [r for r in group if r["cluster_usd"] <= budget_usd]
            if within:
                pick = max(within, key=lambda r: (r["tokens_per_s"], -r["cluster_usd"]))
                text = f"the fastest within {_money(budget_usd)} is {describe(pick)}"
            else:
                pick = min(group, key=lambda r: r["cluster_usd"])
                text = f"no option fits {_money(budget_usd)}; the cheapest is {describe(pick)}"
        else:
            text = f"the lowest cost per token/s is {describe(cheapest)}"
            if fastest is not cheapest:
                more = fastest["tokens_per_s"] / cheapest["tokens_per_s"] - 1
                cost = fastest["cluster_usd"] / cheapest["cluster_usd"] - 1
                text += (f"; the fastest is {fastest['option']} with {fastest['parallel']} "
                         f"({more:+.1%} tokens/s for {cost:+.1%} cost)")
        out.append(head + text + _assumed(group))
    return out


def tie_lines(rows: list[dict]) -> list[str]:
    """One sentence per GPU count where two or more options' steps tie (module doc); rows are named by their
    number in the plan's tables (#1 the first row)."""
    out = []
    for gpus in sorted({r["gpus"] for r in rows}):
        group = [(i, r) for i, r in enumerate(rows, 1) if r["gpus"] == gpus]
        fastest = min(r["step_time_s"] for _, r in group)
        tied = [(i, r) for i, r in group if r["step_time_s"] <= fastest * (1 + TIE_REL)]
        if len(tied) < 2:
            continue
        names = ", ".join(f"#{i}" for i, _ in tied)
        most = max(exposed_share(r) for _, r in tied)
        between = max(exposed_share(r, SERVER_PARTS) for _, r in tied)
        head = f"at {gpus:,} GPUs options {names} tie (steps within {TIE_REL:.1%} of {fastest:.4g} s)"
        if most < HIDDEN_SHARE:
            out.append(f"{head} because the network is hidden: exposed communication is at most {most:.1%} of "
                       f"their step, so the cheaper one is the better buy")
        elif between < HIDDEN_SHARE:
            out.append(f"{head} because the network between the servers is hidden (DP/PP/CP/EP exposed at most "
                       f"{between:.1%} of the step; the {most:.1%} exposed is TP's, inside a server)")
        else:
            out.append(f"{head} though up to {most:.1%} of a step is exposed communication: their networks "
                       f"cost about the same time")
    return out
