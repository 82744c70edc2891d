"""`fabriclab bench train-llm`: tokens/s of the transformer trainer beside a plain PyTorch loop (TP=1) and
DTensor's tensor parallelism (TP=2), in one run (`bench/train/llm.py`); prints the ratios.

Try it: `fabriclab bench train-llm --model gpt-tiny --gbs 16 --steps 10 --rounds 3`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional

import typer
from rich import box
from rich.table import Table

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, user_errors
from fabriclab.cli.options import parse_count


def register(app: typer.Typer) -> None:
    app.command("train-llm")(train_llm_cmd)


@user_errors
def train_llm_cmd(
    model: str = typer.Option("gpt-tiny", help="A dense transformer (gpt-tiny, a config.json)."),
    gbs: str = typer.Option("16", metavar="N", help="Global batch (sequences per step)."),
    mbs: str = typer.Option("4", metavar="N", help="Micro-batch size."),
    seq: Optional[str] = typer.Option(None, metavar="TOKENS", help="Sequence length (default: the model's)."),
    steps: str = typer.Option("10", metavar="N", help="Timed steps per peer and round."),
    warmup: str = typer.Option("3", metavar="N", help="Untimed steps before them."),
    rounds: str = typer.Option("3", metavar="N", help="Alternating rounds; the median ratio is reported."),
    tp: bool = typer.Option(True, "--tp/--no-tp", help="Also TP=2 against DTensor (2 ranks)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Our transformer trainer's tokens/s against a plain PyTorch loop (TP=1, goal >= 0.95x) and DTensor (TP=2)."""
    from fabriclab.bench.train.llm import LlmBenchConfig, run_bench

    out = Output(fmt, json_path, store)
    config = LlmBenchConfig(model=model, gbs=parse_count(gbs, "--gbs"), mbs=parse_count(mbs, "--mbs"),
                            seq=None if seq is None else parse_count(seq, "--seq"), steps=parse_count(steps, "--steps"),
                            warmup=parse_count(warmup, "--warmup", minimum=0), rounds=parse_count(rounds, "--rounds"),
                            tp=tp)
    config.train_config()  # a bad model or batch is one clean line before anything runs
    result = run_bench(config, on_round=lambda name, row: out.note(
        f"{name}, round {row['round'] + 1}: ours {row['ours_tokens_per_s']:.0f} tokens/s, peer "
        f"{row['peer_tokens_per_s']:.0f}, ratio {row['ratio']:.3f}, losses {'agree' if row['losses_agree'] else 'DIFFER'}"))
    out.table(table(result, config))
    out.record("bench.train_llm", asdict(config), result, top={k: v["ratio"] for k, v in result.items()})
    if not all(v["losses_agree"] for v in result.values()):
        raise typer.Exit(1)


def table(result: dict, config) -> Table:
    t = Table(title=f"{config.model}, gbs {config.gbs}, mbs {config.mbs}: tokens/s, median of {config.rounds} rounds",
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for h in ("layout", "peer", "ours tok/s", "peer tok/s", "ours / peer", "goal"):
        t.add_column(h, justify="left" if h in ("layout", "peer") else "right", no_wrap=True)
    for name, r in result.items():
        one = name == "one_rank"
        t.add_row("TP=1" if one else "TP=2", "plain loop" if one else "DTensor", f"{r['ours_tokens_per_s']:.0f}",
                  f"{r['peer_tokens_per_s']:.0f}", f"{r['ratio']:.3f}",
                  "-" if r["goal_ratio"] is None else f">= {r['goal_ratio']:g}")
    return t
