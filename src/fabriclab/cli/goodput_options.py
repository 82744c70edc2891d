"""Goodput's options, defined once: how a job checkpoints and restarts, its storage, its failure rates, and
how `plan` ranks (`docs/goodput.md`).

`whatif llm` takes `--checkpoint-interval --async-checkpoint --restart-time --storage-bandwidth
--failure-rates`; `plan --model <LLM>` takes `--rank goodput`. Durations may be written in minutes or
hours here (`30min`, `2h`), besides what `units.parse_time` reads.

Try it: `fabriclab whatif llm --model llama3-405b --gpus 16384 --tp 8 --pp 16 --seq 8192 --gbs 2048
--recompute full --async-checkpoint`.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

CheckpointIntervalOption = Annotated[Optional[str], typer.Option(
    "--checkpoint-interval", metavar="TIME", help="Training time between checkpoints, e.g. 30min (default: the "
                                                  "one that keeps the most goodput, Daly 2006).")]
AsyncCheckpointOption = Annotated[bool, typer.Option(
    "--async-checkpoint/--sync-checkpoint", help="Pause only to copy the state to host memory and write it in the "
                                                 "background (default: training pauses for the write).")]
RestartTimeOption = Annotated[Optional[str], typer.Option(
    "--restart-time", metavar="TIME", help="From a failure to the job running again, before it reads its "
                                           "checkpoint: detection, rescheduling, start (default 10min).")]
StorageBandwidthOption = Annotated[Optional[str], typer.Option(
    "--storage-bandwidth", metavar="RATE", help="The file system's total rate for checkpoints, e.g. 2TB/s "
                                                "(default: the cluster file's storage, else Llama 3's 2 TB/s).")]
FailureRatesOption = Annotated[str, typer.Option(
    "--failure-rates", metavar="NAME", help="Component failure rates: llama3 (from the Llama 3 405B run), rsc1 or "
                                            "rsc2 (scaled to Meta's research clusters).")]
RankOption = Annotated[Optional[str], typer.Option(
    "--rank", metavar="tokens|goodput", help="With an LLM: rank by the step's tokens/s per dollar (default), or "
                                             "also by goodput per dollar, buying dual ToR and spare servers where "
                                             "they pay.")]

_UNITS = (("min", 60.0), ("h", 3600.0))


def parse_duration(text: str, option: str) -> float:
    """Seconds in `30min`, `2h`, or any time `units.parse_time` reads (`600s`, `600`)."""
    from fabriclab.units import parse_time

    word = text.strip().lower()
    for unit, scale in _UNITS:
        if word.endswith(unit) and not word.endswith("ms"):
            try:
                return float(word[: -len(unit)].strip()) * scale
            except ValueError:
                break
    try:
        return parse_time(word)
    except ValueError:
        raise ValueError(f"{option} {text!r}: give a duration such as 30min, 2h or 600s") from None


def checkpoint_policy(interval: str | None, asynchronous: bool, restart: str | None):
    """The `CheckpointPolicy` of the options above, checked at the edge."""
    from fabriclab.whatif.goodput.checkpoint import DEFAULT_RESTART_S, CheckpointPolicy

    return CheckpointPolicy(
        interval_s=None if interval is None else parse_duration(interval, "--checkpoint-interval"),
        asynchronous=asynchronous,
        restart_s=DEFAULT_RESTART_S if restart is None else parse_duration(restart, "--restart-time"))


def with_storage(cluster, total: str | None):
    """The cluster with its file system's total rate set by `--storage-bandwidth` (None: as it is)."""
    if total is None:
        return cluster
    from dataclasses import replace

    from fabriclab.units import parse_bandwidth

    try:
        rate = parse_bandwidth(total)
    except ValueError as err:
        raise ValueError(f"--storage-bandwidth {total!r}: give a rate such as 2TB/s or 16Tbps ({err})") from None
    storage = replace(cluster.storage, total_Bps=rate, source=f"--storage-bandwidth {total}")
    return replace(cluster, storage=storage)


def parse_rank(text: str | None) -> str:
    """`--rank`: tokens (default) or goodput."""
    word = "tokens" if text is None else text.strip().lower()
    if word not in ("tokens", "goodput"):
        raise ValueError(f"--rank {text!r}: give tokens (the step's tokens/s per dollar) or goodput (the tokens "
                         f"that survive failures, per dollar)")
    return word
