"""What a predictor of a published row answers (`Prediction`), each input with its source (`Input`): the
predictors (`hpc.py`, `llm.py`, `train.py`) return them, the comparison (`rows.py`) sets them beside the
published numbers.

Try it: `fabriclab validate published --models both`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Input:
    """One input of a prediction and where it comes from."""

    name: str
    """What it is, e.g. `NIC rate`."""
    value: str
    """Its value with units, as text."""
    source: str
    """Where it comes from: `paper: ...`, `data sheet: ...`, `docs: ...`, `calibrated on: rows`, `assumed: why`."""


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """A model set's answer for one row."""

    value: float | None
    """Predicted value in the row's unit; None: this model set cannot predict the row."""
    inputs: tuple[Input, ...] = ()
    """Every input used, with its source."""
    note: str = ""
    """How the number was computed, or why it cannot be."""
