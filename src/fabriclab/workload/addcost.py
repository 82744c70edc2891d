"""The element-wise add cost table of Zhang et al. (AddEst): `bytes,seconds` per line, interpolated.

The paper estimates the reduction cost of a ring all-reduce as (N-1) * AddEst(S/N), interpolating a
measured table of fp32 vector adds linearly (numpy.interp: clamped at both ends). The V100 table ships
with fabriclab; `fabriclab profile add-cost` measures one for the local device.

Try it: `python -c "from fabriclab.workload.addcost import builtin_add_cost; print(builtin_add_cost().est(4e6))"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fabriclab.textfile import read_text

DATA_DIR = Path(__file__).parent / "data" / "v100"


@dataclass(frozen=True)
class AddCost:
    """Seconds to add two vectors of a given size in bytes, by linear interpolation of a table."""

    size_bytes: np.ndarray
    seconds: np.ndarray
    source: str = ""

    def est(self, size_bytes):
        return np.interp(size_bytes, self.size_bytes, self.seconds)

    @classmethod
    def from_log(cls, path: str | Path) -> "AddCost":
        path = Path(path)
        try:
            lines = read_text(path).splitlines()
        except OSError as exc:
            raise ValueError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or 'not text'})") from None
        sizes, secs = [], []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split(",")
            try:
                size, sec = float(parts[0]), float(parts[1])
            except (ValueError, IndexError):
                raise ValueError(f"{path}:{lineno}: expected `bytes,seconds`, got {line!r}") from None
            if not (0 <= size < float("inf") and 0 <= sec < float("inf")):
                raise ValueError(f"{path}:{lineno}: negative value or NaN/inf in {line!r}")
            sizes.append(size)
            secs.append(sec)
        if not sizes:
            raise ValueError(f"{path}: empty add-cost table; expected lines `bytes,seconds`")
        order = np.argsort(sizes, kind="stable")
        return cls(np.asarray(sizes)[order], np.asarray(secs)[order], str(path))

    @classmethod
    def zero(cls) -> "AddCost":
        return cls(np.array([0.0]), np.array([0.0]), "no reduction cost")


def builtin_add_cost() -> AddCost:
    """The V100 table of Zhang et al.'s repository."""
    return AddCost.from_log(DATA_DIR / "cuda_vec_add.log")
