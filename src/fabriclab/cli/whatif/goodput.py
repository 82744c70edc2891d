"""`whatif llm`'s goodput lines: interruptions a day, the checkpoint, the effective training time, goodput.

The job's parts are counted from the cluster's topology (`plan/llm/goodput.job_components`), its failures
costed with the rates, checkpoint and restart of `cli/goodput_options.py` (`whatif/goodput/`,
`docs/goodput.md`). Returns the fields the run's record keeps.

Try it: `fabriclab whatif llm --model llama3-405b --gpus 16384 --tp 8 --pp 16 --seq 8192 --gbs 2048 --recompute full`.
"""

from __future__ import annotations

import textwrap

from fabriclab.cli.common import Output

NAMES = {"gpu": "GPU", "hbm": "HBM", "host": "host", "nic": "NIC", "host_cable": "NIC cable", "leaf": "leaf",
         "nvlink_tray": "NVLink tray", "software": "software"}


def _note(out: Output, text: str) -> None:
    out.note(textwrap.fill(text, width=80, subsequent_indent="  ", break_on_hyphens=False))


def _size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:,.0f} B"


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"  # never 2.6e+03


def _time(seconds: float) -> str:
    for unit, scale in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * scale or unit == "min" and seconds >= scale:
            return f"{_num(seconds / scale)} {unit}"
    return f"{_num(seconds)} s"


def _rate(Bps: float) -> str:
    return f"{_num(Bps / 1e12)} TB/s" if Bps >= 1e12 else f"{_num(Bps / 1e9)} GB/s"


def job_goodput(cluster, answer, options: tuple) -> tuple:
    """The goodput of `answer` on `cluster` (`options`: --checkpoint-interval, --async-checkpoint,
    --restart-time, --storage-bandwidth, --failure-rates as given), checked before anything is printed: the
    Goodput, the step's seconds, the storage path and the checkpoint policy."""
    from fabriclab.cli.goodput_options import checkpoint_policy, with_storage
    from fabriclab.plan.llm.goodput import answer_goodput
    from fabriclab.whatif.goodput.rates import rate_table

    interval, asynchronous, restart, storage, rates = options
    policy = checkpoint_policy(interval, asynchronous, restart)
    cluster = with_storage(cluster, storage)
    g = answer_goodput(answer, cluster, policy=policy, rates=rate_table(rates))
    return g, answer.step_time_s, cluster.storage, policy


def report_goodput(out: Output, run: tuple) -> dict:
    """Print a `job_goodput` and return the fields the run's record keeps."""
    g, step_s, storage, policy = run
    print_goodput(out, g, step_s, storage, policy)
    return {**g.record(), "checkpoint_asynchronous": policy.asynchronous, "restart_time_s": policy.restart_s,
            "storage_total_Bps": storage.total_Bps, "storage_per_server_Bps": storage.per_server_Bps}


def print_goodput(out: Output, g, step_s: float, storage, policy) -> None:
    """The goodput lines (module doc)."""
    kinds = sorted(((k, v) for k, v in g.by_kind_per_day.items() if v > 0), key=lambda kv: -kv[1])
    _note(out, f"goodput ({g.rates} failure rates, docs/goodput.md): {g.interruptions_per_day:.3g} interruptions a "
               f"day, {g.unexpected_per_day:.3g} unexpected ("
               + ", ".join(f"{NAMES.get(k, k)} {v:.2g}" for k, v in kinds)
               + f") and {g.planned_per_day:.2g} planned; one unexpected every {_time(g.mttf_s)}")
    c = g.checkpoint
    mode = (f"asynchronous: a {_time(c.pause_s)} pause, then written in {_time(c.write_s)}" if policy.asynchronous
            else f"training pauses {_time(c.write_s)} to write it")
    bound = (f"the file system's {_rate(storage.total_Bps)}" if c.bound == "storage total"
             else f"a server's {_rate(storage.per_server_Bps)}")
    _note(out, f"checkpoint: {_size(c.total_bytes)} (at most {_size(c.shard_bytes)} from one GPU), {mode} at "
               f"{bound}; every {_time(g.checkpoint_interval_s)} of training ({g.checkpoint_interval_s / step_s:,.0f} "
               f"steps, {g.interval_rule}); a failure costs a {_time(g.restart_s)} restart (read "
               f"{_time(c.read_s)}" + (f", waiting for a repair {_time(g.wait_s)}" if g.wait_s > 0 else "")
               + ") and the work since the last checkpoint")
    _note(out, f"effective training time {g.effective_training_time:.1%}: goodput {g.goodput_tokens_per_s:,.0f} "
               f"tokens/s of the step's {g.step_tokens_per_s:,.0f}")
