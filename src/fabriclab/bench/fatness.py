"""The "network fatness" study of Zhang, Li, Tanimura, Nakada ("How Much Should We Invest for Network
Facility") as a resumable sweep: 1 GB of gradients on fat trees.

Grid (the poster's): 2-level fat trees of 128, 512 and 2048 hosts and 3-level ones of 256 and 1024;
bisection 1, 1/2, 1/4, 1/8, 1/16; links of 1 and 4 GB/s; 0.2 and 1 us per link; methods ring, flat
butterfly (recursive halving-doubling, nearest partner first as in MPICH, and far first), layered
butterfly (butterfly inside each leaf, then across the leaf leaders) and parameter server (P/8
servers spread evenly, also workers). Hosts hang off leaves of 16 (the 3-level tree of 256 hosts uses
leaves of 8 so that it has two pods at every ratio; see `fabric.fattree` for where the ratio is
applied). One rank per host, linear placement, D-mod-K routing, float32 gradients.

Every finished point is appended to the CSV at once, so an interrupted sweep resumes where it stopped. The
CSV is not trusted on resume: a row cut short (no newline, a missing field) or holding NaN is dropped and
computed again, and a file that is not a sweep CSV at all is an error naming it.

Try it: `fabriclab simulate sweep --preset fatness --out results/fatness`.
"""

from __future__ import annotations

import csv
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator

from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.sim.collective import simulate

SIZE_BYTES = 2**30  # the poster's "1GBytes = 32bit x 256M"
BISECTIONS = ("1", "1/2", "1/4", "1/8", "1/16")
LINKS_GBPS = (1, 4)
LATENCIES_US = (0.2, 1.0)
TREES = ((2, 128, 16, None), (2, 512, 16, None), (2, 2048, 16, None), (3, 256, 8, 16), (3, 1024, 16, 16))
METHODS = ("ring", "butterfly-near", "butterfly-far", "layered-butterfly", "parameter-server")
FIELDS = ("layers", "hosts", "bisection", "link_GBps", "latency_us", "method", "algo", "time_s",
          "engine", "exact", "wall_s")


@dataclass(frozen=True, kw_only=True)
class Point:
    """One simulation of the sweep."""

    layers: int
    """Fat-tree levels."""
    hosts: int
    """Hosts (one rank each)."""
    hosts_per_leaf: int
    """Hosts under a leaf switch; also the layered butterfly's group."""
    leaves_per_pod: int | None
    """Leaves per pod of a 3-level tree."""
    bisection: str
    """Bisection ratio."""
    link_GBps: float
    """Link bandwidth in GB/s (10^9 bytes per second)."""
    latency_us: float
    """Per-link latency in microseconds."""
    method: str
    """Method name as the poster calls it."""

    @property
    def key(self) -> tuple[str, ...]:
        return (str(self.layers), str(self.hosts), self.bisection, f"{self.link_GBps:g}",
                f"{self.latency_us:g}", self.method)

    def algo(self) -> str:
        return {"ring": "ring", "butterfly-near": "butterfly:order=near",
                "butterfly-far": "butterfly:order=far",
                "layered-butterfly": f"hierarchical:lower=butterfly:upper=butterfly:group={self.hosts_per_leaf}",
                "parameter-server": f"parameter-server:servers={max(1, self.hosts // 8)}"}[self.method]

    def topology_spec(self) -> TopologySpec:
        return TopologySpec(kind="fat-tree", levels=self.layers, hosts=self.hosts,
                            hosts_per_leaf=self.hosts_per_leaf, leaves_per_pod=self.leaves_per_pod,
                            bisection=Fraction(self.bisection), bandwidth_Bps=self.link_GBps * 1e9,
                            latency_s=self.latency_us * 1e-6)


def fatness_points() -> list[Point]:
    return [Point(layers=lv, hosts=h, hosts_per_leaf=k, leaves_per_pod=p, bisection=b, link_GBps=bw,
                  latency_us=lat, method=m)
            for lv, h, k, p in TREES for b in BISECTIONS for bw in LINKS_GBPS for lat in LATENCIES_US
            for m in METHODS]


def _key_of_row(row: dict) -> tuple[str, ...]:
    return (row["layers"], row["hosts"], row["bisection"], f"{float(row['link_GBps']):g}",
            f"{float(row['latency_us']):g}", row["method"])


def _finite(text: str, positive: bool = False) -> bool:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and (value > 0 if positive else value >= 0)


def _valid(row: dict) -> bool:
    """A finished point: every field present, numbers finite, names known (a cut or NaN row is not)."""
    if None in row or any(row.get(f) in (None, "") for f in FIELDS):
        return False
    return (row["layers"] in ("2", "3") and row["hosts"].isdigit() and row["bisection"] in BISECTIONS
            and row["method"] in METHODS and row["exact"] in ("True", "False") and _finite(row["link_GBps"], True)
            and _finite(row["latency_us"]) and _finite(row["time_s"], True) and _finite(row["wall_s"]))


def read_csv(csv_path: Path) -> tuple[list[dict], list[str]]:
    """(finished rows, what was left out and why) of a sweep CSV; a file that is not one is a ValueError.

    The last line counts only when it ends with a newline (the writer flushes whole rows), so a row cut
    inside a number is not taken for a finished point."""
    if not csv_path.exists():
        return [], []
    try:
        text = csv_path.read_bytes().decode("utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{csv_path}: not a fatness sweep CSV ({getattr(exc, 'reason', exc)}): move it away "
                         f"or give another --out") from None
    if "\0" in text:
        raise ValueError(f"{csv_path}: not a fatness sweep CSV (binary data): move it away or give another --out")
    lines = text.split("\n")
    notes = []
    if lines[-1]:
        notes.append(f"{csv_path}: dropped an unfinished last row ({lines[-1][:40]!r}); it is computed again")
    lines = lines[:-1]
    if not lines:
        return [], notes
    if lines[0].strip() != ",".join(FIELDS):
        raise ValueError(f"{csv_path}: its header {lines[0][:60]!r} is not a fatness sweep CSV's: move it away "
                         f"or give another --out")
    rows = []
    for number, row in enumerate(csv.DictReader(lines, restval=None), 2):
        if _valid(row):
            rows.append(row)
        else:
            notes.append(f"{csv_path}: dropped line {number}, not a finished point; it is computed again")
    return rows, notes


def load_rows(csv_path: Path) -> list[dict]:
    """The finished points of a sweep CSV (see `read_csv`)."""
    return read_csv(csv_path)[0]


def repair_csv(csv_path: Path) -> list[str]:
    """Rewrite the CSV with its finished rows only when it holds anything else; returns what was dropped."""
    rows, notes = read_csv(csv_path)
    if notes:
        tmp = csv_path.with_name(csv_path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows({k: r[k] for k in FIELDS} for r in rows)
        tmp.replace(csv_path)
    return notes


class FatnessWork:
    """The topology of the points running in one process: one alive at a time (2048 hosts is large);
    pickled empty."""

    def __init__(self) -> None:
        self.topologies: dict = {}

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.topologies = {}


def simulate_point(work: FatnessWork, point: Point) -> dict:
    """The CSV row of one point (values as the CSV holds them)."""
    spec = point.topology_spec()
    if spec not in work.topologies:
        work.topologies = {spec: build_topology(spec)}
    t0 = time.perf_counter()
    result = simulate("allreduce", point.algo(), work.topologies[spec], point.hosts, SIZE_BYTES)
    return {"layers": point.layers, "hosts": point.hosts, "bisection": point.bisection,
            "link_GBps": f"{point.link_GBps:g}", "latency_us": f"{point.latency_us:g}",
            "method": point.method, "algo": point.algo(), "time_s": repr(result.time_s),
            "engine": result.engine, "exact": result.exact, "wall_s": f"{time.perf_counter() - t0:.3f}"}


def todo_points(points: list[Point], csv_path: Path) -> list[Point]:
    """The points not yet finished in `csv_path` (repaired first, see `repair_csv`)."""
    repair_csv(csv_path)
    done = {_key_of_row(r) for r in load_rows(csv_path)}
    return [p for p in points if p.key not in done]


@contextmanager
def csv_appender(csv_path: Path) -> Iterator[Callable[[dict], None]]:
    """`append(row)`: one finished row written and flushed at once (the header first in a new file)."""
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    new_file = not csv_path.exists() or csv_path.stat().st_size == 0
    with csv_path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        if new_file:
            writer.writeheader()
            f.flush()

        def append(row: dict) -> None:
            writer.writerow(row)
            f.flush()
        yield append


def in_point_order(rows: list[dict], points: list[Point]) -> list[dict]:
    """CSV rows in the order of `points` (whoever finished first), rows of other points after them."""
    order = {p.key: i for i, p in enumerate(points)}
    return sorted(rows, key=lambda r: order.get(_key_of_row(r), len(order)))


def run_points_progress(points: list[Point], csv_path: Path) -> Iterator[tuple[Point, dict | None]]:
    """(point, its new row or None when it was already done) for every point, simulating those not yet
    in `csv_path` and appending each result as soon as it is known."""
    todo = {p.key for p in todo_points(points, csv_path)}
    work = FatnessWork()
    with csv_appender(csv_path) as append:
        for point in points:
            if point.key not in todo:
                yield point, None
                continue
            row = simulate_point(work, point)
            append(row)
            yield point, row


def run_points(points: list[Point], csv_path: Path, progress: Callable[[Point, bool], None] | None = None
               ) -> Iterator[dict]:
    """Simulate every point not yet in `csv_path`, yielding the new rows; `progress(point, was_done)`."""
    for point, row in run_points_progress(points, csv_path):
        if progress:
            progress(point, row is None)
        if row is not None:
            yield row
