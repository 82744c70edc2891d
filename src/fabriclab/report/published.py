"""Tables of `fabriclab validate published`: published value, ours before and after, the error, the inputs.

* `comparison_table`: one line per published number (fits 80 columns in `plain`): the row's key, the
  published value, each model set's prediction and error (`pt`: points of 100 % for scaling factors and
  percentages; `%`: relative error for ratios), `*` where the error is beyond the goal (5 points, 10 %).
* `inputs_table`: every input of every prediction with its source.
* `notes_table`: how each prediction was made (or why a model set cannot make it).
* `summary_lines`: how many rows each model set predicts within the goal.

Try it: `fabriclab validate published --format markdown`.
"""

from __future__ import annotations

from rich.table import Table

from fabriclab.bench.published.rows import Comparison
from fabriclab.bench.published.data import POINTS, POINTS_GOAL, RELATIVE_GOAL

LABELS = {"baseline": "before", "mechanisms": "after"}


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "fraction":
        return f"{value:.3f}"
    if unit == "%":
        return f"{value:.2f} %"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:.2f}x"


def format_error(c: Comparison, model_set: str) -> str:
    err = c.error(model_set)
    if err is None:
        return "n/a"
    unit = "pt" if c.row.error_kind == POINTS else "%"
    return f"{err:+.1f} {unit}" + ("" if c.within_goal(model_set) else " *")


def comparison_table(comparisons: list[Comparison], model_sets: tuple[str, ...]) -> Table:
    table = Table(title="published measurements vs. fabriclab (* beyond the goal: 5 pt, 10 %)")
    table.add_column("row")
    table.add_column("published", justify="right")
    for name in model_sets:
        table.add_column(LABELS[name], justify="right")
        table.add_column("error", justify="right")
    for c in comparisons:
        cells = [c.row.key, format_value(c.row.value, c.row.unit)]
        for name in model_sets:
            cells += [format_value(c.predictions[name].value, c.row.unit), format_error(c, name)]
        table.add_row(*cells)
    return table


def rows_table(comparisons: list[Comparison]) -> Table:
    table = Table(title="what each row is and where the paper gives it")
    for col in ("row", "paper", "where", "quantity"):
        table.add_column(col)
    for c in comparisons:
        table.add_row(c.row.key, c.row.paper, c.row.where, c.row.quantity)
    return table


def notes_table(comparisons: list[Comparison], model_sets: tuple[str, ...]) -> Table:
    table = Table(title="how each prediction was made")
    for col in ("row", "model", "note"):
        table.add_column(col)
    for c in comparisons:
        for name in model_sets:
            table.add_row(c.row.key, LABELS[name], c.predictions[name].note)
    return table


def inputs_table(comparisons: list[Comparison], model_sets: tuple[str, ...]) -> Table:
    table = Table(title="inputs of every prediction and their sources")
    for col in ("row", "model", "input", "value", "source"):
        table.add_column(col)
    for c in comparisons:
        for name in model_sets:
            for i in c.predictions[name].inputs:
                table.add_row(c.row.key, LABELS[name], i.name, i.value, i.source)
    return table


def summary_lines(comparisons: list[Comparison], model_sets: tuple[str, ...]) -> list[str]:
    out = []
    for name in model_sets:
        predicted = [c for c in comparisons if c.predictions[name].value is not None]
        within = sum(bool(c.within_goal(name)) for c in predicted)
        out.append(f"{LABELS[name]} ({name}): {within} of {len(predicted)} rows within the goal "
                   f"({POINTS_GOAL:g} pt / {RELATIVE_GOAL:g} %), {len(comparisons) - len(predicted)} not predicted")
    return out
