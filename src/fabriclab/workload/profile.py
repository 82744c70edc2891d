"""A workload profile: when each gradient is ready, how big it is, and how long an iteration takes.

This is the contract between the profiler (which measures a real model), the `.bk.log` format of Zhang
et al., "Is Network the Bottleneck of Distributed Training?" (NetAI'20; their repository's logs are in
`../shared/reference/training-bottleneck`) and the what-if simulator.
Pure data: standard library only, so the what-if runs where torch is not installed.

* `layers`: forward order; name, parameter bytes, forward and backward seconds (0 where unknown, as
  in a `.bk.log`, which records only when gradients became ready).
* `grads`: one row per parameter tensor in the order backward produces them: name, bytes, and the
  time since backward started at which the gradient was ready.
* `iteration_s`: measured single-device iteration (forward + backward + update) at `batch_size`.

Try it: `python -c "from fabriclab.workload.profile import read_bk_log; print(read_bk_log('../shared/reference/training-bottleneck/resnet50.bk.log', iteration_s=0.12809).summary())"`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fabriclab.textfile import read_text


@dataclass(frozen=True, kw_only=True)
class LayerTime:
    """One layer in forward order."""

    name: str
    """Layer name, e.g. `layer1.0.conv1`."""
    param_bytes: int
    """Bytes of this layer's parameters."""
    forward_s: float = 0.0
    """Forward time of the layer (0 when unknown)."""
    backward_s: float = 0.0
    """Backward time of the layer (0 when unknown)."""


@dataclass(frozen=True, kw_only=True)
class GradReady:
    """One parameter tensor's gradient, in the order backward produces them."""

    name: str
    """Parameter name, e.g. `fc.weight`."""
    size_bytes: int
    """Bytes of the gradient."""
    ready_s: float
    """Seconds from the start of backward until the gradient was ready."""


@dataclass(frozen=True, kw_only=True)
class Profile:
    """Measured timings of one model on one device at one batch size."""

    model: str
    """Model name, e.g. `resnet50`."""
    device: str
    """Where it was measured, e.g. `V100` or `cpu (Xeon ...)`."""
    batch_size: int
    """Samples per device per iteration."""
    iteration_s: float
    """Single-device iteration time: forward + backward + update."""
    grads: tuple[GradReady, ...]
    """Gradients in backward order with their ready times."""
    layers: tuple[LayerTime, ...] = ()
    """Layers in forward order (may be empty for a `.bk.log`)."""
    spread_s: float = 0.0
    """Standard deviation of the iteration time over the repeats (0 when unknown)."""
    source: str = ""
    """Where the numbers come from (file, command)."""
    extra: dict = field(default_factory=dict)
    """Anything else worth keeping (e.g. the profiler's settings)."""

    @property
    def backward_s(self) -> float:
        return max((g.ready_s for g in self.grads), default=0.0)

    @property
    def param_bytes(self) -> int:
        return sum(g.size_bytes for g in self.grads)

    def summary(self) -> str:
        return (f"{self.model} on {self.device}, batch {self.batch_size}: {len(self.grads)} gradients, "
                f"{self.param_bytes / 1e6:.2f} MB, backward {self.backward_s * 1e3:.2f} ms, "
                f"iteration {self.iteration_s * 1e3:.2f} ms")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str, source: str = "<json>") -> "Profile":
        _check_finite_json(text, source)
        try:
            data = json.loads(text)
            grads = tuple(GradReady(**g) for g in data.pop("grads"))
            layers = tuple(LayerTime(**layer) for layer in data.pop("layers", ()))
            profile = cls(grads=grads, layers=layers, **data)
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{source}: not a fabriclab profile ({exc})") from None
        _check(profile, source)
        return profile


# JSON strings, and the number tokens Python's json module reads (NaN, Infinity are not standard JSON).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:NaN|Infinity)|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?')


def _check_finite_json(text: str, source: str) -> None:
    """A NaN, an infinity or a number too large for a float, named by its line in the file."""
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token.startswith('"'):
            continue
        if "N" in token or "I" in token or not math.isfinite(float(token)):
            line = text.count("\n", 0, match.start()) + 1
            raise ValueError(f"{source}:{line}: {token} is not a finite number; every time and size of a "
                             f"profile must be one")


def _check(p: Profile, source: str) -> None:
    numbers = [p.iteration_s, p.batch_size, p.spread_s] + [x for g in p.grads for x in (g.size_bytes, g.ready_s)]
    numbers += [x for layer in p.layers for x in (layer.param_bytes, layer.forward_s, layer.backward_s)]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in numbers):
        raise ValueError(f"{source}: every time and size must be a finite number (found NaN, inf or text)")
    if p.iteration_s <= 0 or p.batch_size < 1:
        raise ValueError(f"{source}: iteration_s must be > 0 and batch_size >= 1")
    last = 0.0
    for i, g in enumerate(p.grads):
        if g.size_bytes < 0 or g.ready_s < last - 1e-12:
            raise ValueError(f"{source}: gradient {i} ({g.name}) has negative bytes or a ready time "
                             f"before the previous one")
        last = g.ready_s


def check_replayable(p: Profile, source: str) -> Profile:
    """A profile the what-if can replay: every gradient is ready before the iteration ends. (The profiler
    itself may write one that is not, when its hooked backward ran slower than the plain iteration.)"""
    if p.backward_s > p.iteration_s * (1 + 1e-9):
        raise ValueError(f"{source}: the last gradient is ready at {p.backward_s * 1e3:.4g} ms, after the "
                         f"iteration of {p.iteration_s * 1e3:.4g} ms has ended: give the whole iteration's time "
                         f"(forward + backward + update; --iteration-time for a .bk.log)")
    return p


def read_bk_log(path: str | Path, *, iteration_s: float, model: str | None = None,
                device: str = "V100", batch_size: int = 32) -> Profile:
    """Read Zhang et al.'s backward log (`.bk.log`): a comment line, the number of batches, the number of
    rows, then `wait_us,param_bytes` per gradient in backward order (wait since the previous gradient)."""
    path = Path(path)
    try:
        lines = read_text(path).splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or 'not text'})") from None
    if len(lines) < 3:
        raise ValueError(f"{path}: empty or truncated; expected a comment line, the number of batches, "
                         f"the number of rows, then rows `wait_us,param_bytes`")
    num_rows = _int(lines[2], path, 3, "the number of rows")
    _int(lines[1], path, 2, "the number of batches")
    rows = [(i + 4, line) for i, line in enumerate(lines[3:]) if line.strip()]
    if len(rows) != num_rows:
        raise ValueError(f"{path}: line 3 says {num_rows} rows but the file has {len(rows)}")
    grads, t = [], 0.0
    for lineno, line in rows:
        parts = line.split(",")
        if len(parts) != 2:
            raise ValueError(f"{path}:{lineno}: expected two columns `wait_us,param_bytes`, got {line!r}")
        wait_us, size = _float(parts[0], path, lineno, "wait_us"), _float(parts[1], path, lineno, "param_bytes")
        if wait_us < 0 or size < 0:
            raise ValueError(f"{path}:{lineno}: negative value in {line!r}")
        t += wait_us * 1e-6
        grads.append(GradReady(name=f"grad{len(grads)}", size_bytes=int(size), ready_s=t))
    name = model or path.name.split(".")[0]
    profile = Profile(model=name, device=device, batch_size=batch_size, iteration_s=iteration_s,
                      grads=tuple(grads), source=str(path))
    _check(profile, str(path))
    return profile


def write_bk_log(profile: Profile, path: str | Path) -> Path:
    """Write `profile` in the `.bk.log` format (one batch, already averaged)."""
    out = ["first line is for explaination; sec line: # of batches; 3rd line:# of layers; "
           "first col: time wait for previous layer; second colparam size in bytes", "1", str(len(profile.grads))]
    prev = 0.0
    for g in profile.grads:
        out.append(f"{(g.ready_s - prev) * 1e6!r},{g.size_bytes}")
        prev = g.ready_s
    path = Path(path)
    path.write_text("\n".join(out) + "\n")
    return path


def _int(text: str, path: Path, lineno: int, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{path}:{lineno}: {what} must be a whole number, got {text.strip()!r}") from None


def _float(text: str, path: Path, lineno: int, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{path}:{lineno}: {what} must be a number, got {text.strip()!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{path}:{lineno}: {what} must be a finite number, got {text.strip()!r}")
    return value


# Single-GPU batch times (forward + backward + update, batch 32) from Zhang et al.'s scripts
# (`simulation/sim_with_compression_*.py` in netx-repo/training-bottleneck).
V100_BATCH_S = {"resnet50": 0.12808580219559176, "resnet101": 0.19200599479476405,
                "vgg16": 0.19452352295080985}
DATA_DIR = Path(__file__).parent / "data" / "v100"


def load_profile(name_or_path: str, *, iteration_s: float | None = None) -> Profile:
    """A built-in V100 profile by model name (resnet50, resnet101, vgg16), or a file: a profile JSON
    written by `fabriclab profile`, or a `.bk.log` (then `iteration_s` must be given)."""
    return check_replayable(_load(name_or_path, iteration_s), str(name_or_path))


def _load(name_or_path: str, iteration_s: float | None) -> Profile:
    if name_or_path in V100_BATCH_S:
        return read_bk_log(DATA_DIR / f"{name_or_path}.bk.log", model=name_or_path,
                           iteration_s=iteration_s or V100_BATCH_S[name_or_path])
    path = Path(name_or_path)
    if not path.exists():
        raise ValueError(f"profile {name_or_path!r} is neither a built-in V100 profile "
                         f"({', '.join(V100_BATCH_S)}) nor an existing file")
    if path.name.endswith(".bk.log"):
        if iteration_s is None:
            raise ValueError(f"{path}: a .bk.log has no iteration time; give it (e.g. --iteration-time 0.128)")
        return read_bk_log(path, iteration_s=iteration_s)
    try:
        text = read_text(path, "profile")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or 'not text'})") from None
    if not text.strip():
        raise ValueError(f"{path}: empty profile file")
    return Profile.from_json(text, source=str(path))
