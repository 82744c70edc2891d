"""`plan --rank goodput`'s table: each row's goodput beside its step, and the reliability it buys.

Rows carry the goodput columns `plan/llm/goodput.goodput_row` adds (`docs/goodput.md`); a plan ranked by
tokens has none and gets no table.

Try it: `fabriclab plan --model llama3-8b --gpus 1024 --clusters dgx-h100 --rank goodput`.
"""

from __future__ import annotations

from rich.table import Table


def _every(seconds: float) -> str:
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:.3g} s"


def goodput_tables(rows: list[dict]) -> list[Table]:
    """One table of goodput per row (`#` as in the plan's first table), or none."""
    if not any("goodput_tokens_per_s" in r for r in rows):
        return []
    table = Table(title="goodput: tokens/s kept through failures (ETT: effective training time)")
    for h in ("#", "goodput tok/s", "ETT", "stops/d", "ckpt", "bought", "$/(gp tok/s)"):
        table.add_column(h, justify="left" if h == "bought" else "right")
    for i, r in enumerate(rows, 1):
        if "goodput_tokens_per_s" not in r:
            continue
        table.add_row(str(i), f"{r['goodput_tokens_per_s']:,.0f}", f"{r['effective_training_time']:.1%}",
                      f"{r['interruptions_per_day']:.3g}", _every(r["checkpoint_interval_s"]), _bought(r),
                      f"{r['usd_per_goodput_token_per_s']:,.1f}")
    return [table]


def _bought(row: dict) -> str:
    """`2 ToRs + 64 spares` (dual ToR) / `64 spares`: the reliability a row buys (its price: the notes)."""
    spares = f"{row['spare_servers'] or 0:,} spares"
    return f"2 ToRs + {spares}" if row["dual_tor"] else spares
