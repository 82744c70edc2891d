"""A trainer run in the simulator's words: per step the loss and the step time, and per rank where the
time went (compute, TP, EP, PP, DP, optimizer, bubble) with the bytes each communicator sent.

* step time: from the first rank's start to the last rank's end (the ranks start together, after a
  barrier; the clock is the host's monotonic one, shared by local ranks and network namespaces);
* compute: the passes' time less the communication inside them (TP, EP, ZeRO-3 gathers);
* PP: of the time a rank blocks in a receive, the part after its sender posted the send (the transfer);
  the part before is the bubble, as are the waits for the last sends;
* other: what is left of the step (Python between the passes, the loss's reduction).

The split reported for the step is that of the busiest rank (most compute), as the simulator splits on
the stage that ends last.

Try it: `fabriclab train --model gpt-tiny --np 4 --pp 2 --tp 2 --gbs 8 --steps 3 --json -`.
"""

from __future__ import annotations

import statistics

from fabriclab.runtime.llm.trainer import describe

PARTS = ("compute", "tp", "ep", "pp", "dp", "optimizer", "bubble", "other")
COMMUNICATORS = ("tp", "ep", "pp", "dp")


def rank_split(step: dict, send_start: dict, step_s: float) -> dict[str, float]:
    t, inside = step["time_s"], step["inside"]
    split = {k: 0.0 for k in PARTS}
    split["compute"] = t.get("compute", 0.0) - sum(inside.values())
    for name in ("tp", "ep", "dp", "optimizer"):
        split[name] = t.get(name, 0.0)
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
        split_rows = [rank_split(s, send_start, step_s) for s in steps]
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
