"""A trainer run in the simulator's words: per step the loss and the step time, and per rank where the
time went (compute, TP, EP, PP, DP, optimizer, bubble) with the bytes each communicator sent.

* step time: from the first rank's start to the last rank's end (the ranks start together, after a
  barrier; the clock is the host's monotonic one, shared by local ranks and network namespaces);
* compute: the passes' time less the communication inside them (TP, EP, ZeRO-3 gathers);
* PP: of the time a rank blocks in a receive, the part after its sender posted the send (the transfer);
  the part before is the bubble, as are the waits for the last sends;
* wait: of a rank's time in a TP, EP or DP collective, the part before the last member of its group
  arrived (the n-th call of each member is the same collective); the rest is the collective's own time.
  The simulator has no such part: its ranks arrive together. Many ranks on few cores make it large (a
  partner waits for a core);
* other: what is left of the step (Python between the passes, the loss's reduction).

The split reported for the step is that of the busiest rank (most compute), as the simulator splits on
the stage that ends last.

Try it: `fabriclab train --model gpt-tiny --np 4 --pp 2 --tp 2 --gbs 8 --steps 3 --json -`.
"""

from __future__ import annotations

import statistics

from fabriclab.workload.parallel import ParallelConfig

PARTS = ("compute", "tp", "ep", "pp", "dp", "optimizer", "bubble", "wait", "other")
COMMUNICATORS = ("tp", "ep", "pp", "dp")


def describe(par: ParallelConfig, dtype: str) -> str:
    """The layout as `ParallelConfig.describe` writes it, with the trainer's precision instead of the
    simulator's."""
    return par.describe().replace(f", {par.precision})", f", {dtype})")


def _members(par) -> dict[tuple[str, bool], dict[int, list[int]]]:
    """(thread, experts?) -> rank -> the ranks of its group for that kind of collective."""
    from fabriclab.runtime.llm.groups import expert_dp_groups

    kinds = {("tp", False): par.groups("tp"), ("ep", False): par.groups("ep"), ("dp", False): par.groups("dp"),
             ("dp", True): expert_dp_groups(par)}
    return {k: {r: g for g in groups for r in g} for k, groups in kinds.items()}


def collective_waits(steps: list[dict], members: dict) -> list[dict[str, float]]:
    """Per rank and thread: the time its collectives waited for the last member of their group."""
    seqs = [{} for _ in steps]
    for r, s in enumerate(steps):
        for thread, calls in s["collectives"].items():
            for name, t0, t1 in calls:
                seqs[r].setdefault((thread, "experts" in name), []).append((t0, t1))
    waits = [dict.fromkeys(("tp", "ep", "dp"), 0.0) for _ in steps]
    for r, mine in enumerate(seqs):
        for key, calls in mine.items():
            group = [seqs[m].get(key, []) for m in members[key][r]]
            if any(len(g) != len(calls) for g in group):
                continue  # not the same sequence of calls: leave them whole
            for i, (t0, t1) in enumerate(calls):
                last = max(g[i][0] for g in group)
                waits[r][key[0]] += min(max(0.0, last - t0), t1 - t0)
    return waits


def rank_split(step: dict, send_start: dict, step_s: float, waits: dict | None = None) -> dict[str, float]:
    t, inside = step["time_s"], step["inside"]
    split = {k: 0.0 for k in PARTS}
    split["compute"] = t.get("compute", 0.0) - sum(inside.values())
    for name in ("tp", "ep", "dp", "optimizer"):
        split[name] = t.get(name, 0.0)
    for name, wait in (waits or {}).items():
        split[name] -= wait
        split["wait"] += wait
    transfer = 0.0
    for tag, peer, posted, done in step["recvs"]:
        sent = send_start.get((peer, tag), posted)
        transfer += max(0.0, done - max(posted, sent))
    waiting = t.get("pp", 0.0)
    split["pp"] = min(transfer, waiting)
    split["bubble"] = waiting - split["pp"]
    split["other"] = max(0.0, step_s - sum(split.values()))
    return split


def summarize(config, results: dict[int, dict]) -> dict:
    par = config.par
    ranks = [results[r] for r in sorted(results)]
    num_steps = len(ranks[0]["steps"])
    losses, step_times, splits, byte_rows = [], [], [], []
    members = _members(par)
    for i in range(num_steps):
        steps = [r["steps"][i] for r in ranks]
        last = [r["steps"][i]["loss"] for r in ranks if r["last_stage"] and r["coords"]["tp"] == 0]
        losses.append(sum(last) / len(last))
        if not steps[0]["timed"]:
            continue
        step_s = max(s["end"] for s in steps) - min(s["start"] for s in steps)
        step_times.append(step_s)
        send_start = {}
        for r, s in zip(ranks, steps):
            for tag, peer, t0 in s["sends"]:
                send_start[(r["rank"], tag)] = t0
        # a receive from peer p under tag t matches p's send under t (a rank's tags are unique in a step)
        waits = collective_waits(steps, members)
        split_rows = [rank_split(s, send_start, step_s, w) for s, w in zip(steps, waits)]
        splits.append(split_rows)
        byte_rows.append([{c: s["bytes"].get(c, 0.0) for c in COMMUNICATORS} for s in steps])
    n = len(step_times)
    per_rank = [{k: statistics.fmean(splits[j][r][k] for j in range(n)) for k in PARTS} for r in range(len(ranks))]
    bytes_rank = [{c: statistics.fmean(byte_rows[j][r][c] for j in range(n)) for c in COMMUNICATORS}
                  for r in range(len(ranks))]
    busiest = max(range(len(ranks)), key=lambda r: per_rank[r]["compute"])
    step_s = statistics.median(step_times)
    tokens = par.gbs * par.seq
    return {"model": config.spec.name, "parallel": describe(par, config.dtype), "num_ranks": par.num_gpus,
            "losses": losses, "step_times_s": step_times, "step_time_s": step_s,
            "tokens_per_s": tokens / step_s, "split_s": per_rank[busiest], "busiest_rank": busiest,
            "per_rank_split_s": per_rank, "bytes_per_step": bytes_rank[busiest], "per_rank_bytes": bytes_rank,
            "params_per_rank": [r["params"] for r in ranks],
            "spans": {r["rank"]: r["steps"][-1]["spans"] for r in ranks if r["steps"][-1]["spans"]}}
