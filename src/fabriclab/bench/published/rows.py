"""`fabriclab validate published`: every published measurement beside our prediction, before and after.

For each row of `bench.published_data` two model sets predict the number:

* `baseline`: the models as they were when the comparison was first made (Zhang et al.'s what-if with one
  link per worker, the stencil simulation without overlap, the S-Caffe collectives on a flat star);
* `mechanisms`: the same models with the mechanisms the papers' clusters have (GPU servers sharing a NIC,
  NCCL's ring/tree choice, Horovod's fusion and transport, compute/communication overlap, CUDA-aware
  node internals), each input with its source: the paper, a data sheet, a library's documented default
  or source, or a calibration on OTHER rows (never on the row it is compared with).

`Prediction.value` is None where a model set cannot predict a row (e.g. no profile of the model).

Try it: `fabriclab validate published --models both`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from fabriclab.bench.published.data import (
    POINTS,
    POINTS_GOAL,
    PUBLISHED,
    RELATIVE_GOAL,
    Published,
)
from fabriclab.bench.published.prediction import Input, Prediction

MODEL_SETS = ("baseline", "mechanisms")


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One published number and the predictions of the model sets asked for."""

    row: Published
    """The published measurement."""
    predictions: dict = field(default_factory=dict)
    """Model set name -> Prediction."""

    def error(self, model_set: str) -> float | None:
        """Error of a model set (points or percent, see `published_data`); None without a prediction."""
        p = self.predictions.get(model_set)
        if p is None or p.value is None:
            return None
        if self.row.error_kind == POINTS:
            scale = 100.0 if self.row.unit == "fraction" else 1.0
            return (p.value - self.row.value) * scale
        return (p.value - self.row.value) / self.row.value * 100.0

    def within_goal(self, model_set: str) -> bool | None:
        err = self.error(model_set)
        if err is None:
            return None
        return abs(err) <= (POINTS_GOAL if self.row.error_kind == POINTS else RELATIVE_GOAL)

    def as_dict(self) -> dict:
        out = {"key": self.row.key, "paper": self.row.paper, "where": self.row.where,
               "quantity": self.row.quantity, "unit": self.row.unit, "error_kind": self.row.error_kind,
               "published": self.row.value}
        for name, p in self.predictions.items():
            out[name] = p.value
            out[f"{name}_error"] = self.error(name)
            out[f"{name}_within_goal"] = self.within_goal(name)
            out[f"{name}_note"] = p.note
            out[f"{name}_inputs"] = [asdict(i) for i in p.inputs]
        return out


Predictor = Callable[[Published], Prediction]


def predictors() -> dict[str, dict[str, Predictor]]:
    """Row-key prefix -> model set -> predictor (imported here: the predictors pull numpy and the sims)."""
    from fabriclab.bench.published import hpc as published_hpc
    from fabriclab.bench.published import llm as published_llm
    from fabriclab.bench.published import train as published_train

    return {"zhang-": {"baseline": published_train.zhang_baseline, "mechanisms": published_train.zhang_mechanisms},
            "samsi-25gbe": {"baseline": published_train.samsi_baseline,
                            "mechanisms": published_train.samsi_mechanisms},
            "horovod-": {"baseline": published_train.horovod_baseline,
                         "mechanisms": published_train.horovod_mechanisms},
            "samsi-cartdg": {"baseline": published_hpc.cartdg_baseline,
                             "mechanisms": published_hpc.cartdg_mechanisms},
            "awan-": {"baseline": published_hpc.awan_baseline, "mechanisms": published_hpc.awan_mechanisms},
            "nemo-gpt3-": {"baseline": published_llm.nemo_baseline, "mechanisms": published_llm.nemo_mechanisms}}


def compare(model_sets: tuple[str, ...] = MODEL_SETS, keys: tuple[str, ...] | None = None,
            progress: Callable[[int, int, str], None] | None = None, run_points=None) -> list[Comparison]:
    """One Comparison per published row (all, or those whose key starts with one of `keys`);
    `progress(i, n, key)` is called before row i of n is predicted (here only). `run_points(fn, model_sets,
    row keys)` returns `[fn(model_sets, key) ...]` in order, wherever it runs them (then the predictions
    travel as JSON, `published_point`)."""
    for name in model_sets:
        if name not in MODEL_SETS:
            raise ValueError(f"unknown model set {name!r}: use baseline, mechanisms or both")
    rows = [r for r in PUBLISHED if keys is None or any(r.key.startswith(k) for k in keys)]
    if not rows:
        raise ValueError(f"no published row starts with {', '.join(keys or ())}; "
                         f"rows: {', '.join(r.key for r in PUBLISHED)}")
    if run_points is not None:
        answers = run_points(published_point, tuple(model_sets), [r.key for r in rows])
        return [Comparison(row=row, predictions={name: Prediction(value=a[name]["value"], note=a[name]["note"],
                                                                  inputs=tuple(Input(**i) for i in a[name]["inputs"]))
                                                 for name in model_sets}) for row, a in zip(rows, answers)]
    table = predictors()
    out = []
    for i, row in enumerate(rows):
        if progress is not None:
            progress(i, len(rows), row.key)
        funcs = next(f for prefix, f in table.items() if row.key.startswith(prefix))
        out.append(Comparison(row=row, predictions={name: funcs[name](row) for name in model_sets}))
    return out


def published_point(model_sets: tuple[str, ...], key: str) -> dict:
    """The predictions of the row `key` by each model set, as JSON types (`compare`)."""
    row = next(r for r in PUBLISHED if r.key == key)
    funcs = next(f for prefix, f in predictors().items() if key.startswith(prefix))
    return {name: asdict(funcs[name](row)) for name in model_sets}
