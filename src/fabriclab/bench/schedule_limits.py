"""How big a schedule may be built here, and how long building and verifying many of them takes.

`schedule_work` refuses schedules beyond `MAX_SCHEDULE_RANKS` ranks or `MAX_CHUNKS` pipeline chunks
(before anything is built); `MAX_COUNT` bounds the elements of one buffer. `VerifyCost` estimates a
`collectives verify` sweep, so a sweep that would run for hours is refused with its estimate instead of
looking like a hang. The estimate is `SECONDS_PER_MESSAGE` per message plus `SECONDS_PER_RANK` per rank
of every schedule; the messages of a spec follow the power law through its counts at `PROBE_RANKS`
(built once per spec), capped by the bound of `schedule_work` (n log n algorithms are over-estimated a
little beyond the probes: the safe side).

Standard library only.

Try it: `fabriclab collectives verify --ranks 1-1024` (refused with its estimate).
"""

from __future__ import annotations

import math

from fabriclab.collectives import registry

# Largest schedules built here: a ring allreduce on 1024 ranks (2.1 M messages) takes 24 s to build
# and verify on this machine, a chain with 4096 chunks on 64 ranks (0.5 M messages) 6.4 s.
MAX_SCHEDULE_RANKS = 1024
MAX_CHUNKS = 4096
# Most elements in a schedule's buffer (`collectives verify --counts`, `collectives show --count`); any
# count up to it keeps element offsets within int64, the index type of numpy and torch.
MAX_COUNT = 1 << 62
# Build + verify, measured here on 64 and 256 ranks (ring, trees, parameter server, hierarchical):
# 5-15 us per message; schedules with few messages pay ~0.1 ms per rank (binomial on 256 ranks: 27 ms).
SECONDS_PER_MESSAGE = 1.5e-5
SECONDS_PER_RANK = 1e-4
PROBE_RANKS = (16, 64)
# A large count, so every chunk of a probe has elements (empty chunks send nothing).
_PROBE_COUNT = 1 << 20


def schedule_work(collective: str, spec: str, num_ranks: int) -> int:
    """An upper bound of a schedule's messages, 2 x ranks x max(ranks, chunks); a ValueError for an
    unknown spec, or for ranks or chunks beyond `MAX_SCHEDULE_RANKS` and `MAX_CHUNKS`."""
    _, params = registry.parse_spec(collective, spec, num_ranks)
    if num_ranks > MAX_SCHEDULE_RANKS:
        raise ValueError(f"{num_ranks} ranks: schedules are built for at most {MAX_SCHEDULE_RANKS} ranks here "
                         f"(a ring on {MAX_SCHEDULE_RANKS} ranks takes about 24 s); simulate larger scales "
                         f"with `fabriclab simulate`")
    chunks = params.get("chunks", 1)
    chunks = chunks if isinstance(chunks, int) else 1
    if chunks > MAX_CHUNKS:
        raise ValueError(f"{spec}: chunks={chunks} is more than the {MAX_CHUNKS} pipeline chunks a schedule may "
                         f"have here; give chunks <= {MAX_CHUNKS}")
    return 2 * num_ranks * max(num_ranks, chunks)


class VerifyCost:
    """Estimated seconds to build and verify schedules; with `probe`, message counts are probed once per
    spec (a second or two for every algorithm), else the bound of `schedule_work` is used."""

    def __init__(self, *, probe: bool = True) -> None:
        self.probe = probe
        self._laws: dict[tuple[str, str], tuple[float, float] | None] = {}

    def seconds(self, collective: str, spec: str, num_ranks: int, count: int = _PROBE_COUNT) -> float:
        """Seconds to build and verify one schedule of `spec` on `num_ranks` ranks and `count` elements
        (fewer elements than ranks leave chunks empty, and empty chunks send nothing)."""
        share = min(1.0, max(count, 1) / num_ranks)
        return (SECONDS_PER_MESSAGE * share * self.messages(collective, spec, num_ranks)
                + SECONDS_PER_RANK * num_ranks)

    def messages(self, collective: str, spec: str, num_ranks: int) -> float:
        """Messages of the schedule: counted up to the probe size, the fitted power law beyond."""
        bound = schedule_work(collective, spec, num_ranks)
        law = self._law(collective, spec) if self.probe else None
        if law is None:
            return bound
        scale, exponent = law
        return min(bound, scale * num_ranks ** exponent)

    def _law(self, collective: str, spec: str) -> tuple[float, float] | None:
        key = (collective, spec)
        if key not in self._laws:
            self._laws[key] = _fit(collective, spec)
        return self._laws[key]


def _fit(collective: str, spec: str) -> tuple[float, float] | None:
    """(a, e) of messages = a x ranks^e through the counts at `PROBE_RANKS`; None if a probe fails."""
    try:
        counts = [registry.build_schedule(collective, spec, n, _PROBE_COUNT, 0).num_messages for n in PROBE_RANKS]
    except Exception:  # noqa: BLE001 - a spec that does not build at the probe sizes: use the bound
        return None
    lo, hi = PROBE_RANKS
    if min(counts) < 1:
        return None
    exponent = min(3.0, max(1.0, math.log(counts[1] / counts[0]) / math.log(hi / lo)))
    return counts[1] / hi ** exponent, exponent
