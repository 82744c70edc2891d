"""Every algorithm and parameterisation of every collective verifies at every P = 1..32 and at the shapes
above it: a prime (47), 5 to 8 servers of 8 (40, 48, 56, 64), 33 and 63 (one past and one short of a power
of two). The rest of 33..64 costs two thirds of the time (a schedule of P ranks is P^2 messages) and holds no
shape these lack; `fabriclab collectives verify --algo all --ranks 1-64` checks every one."""

import pytest

from fabriclab.collectives.registry import COLLECTIVE_NAMES, build_schedule, verify_specs
from fabriclab.collectives.schedule import BROADCAST, REDUCE
from fabriclab.collectives.verify import verify

RANKS = (*range(1, 33), 33, 40, 47, 48, 56, 63, 64)


def _counts(p: int) -> tuple[int, ...]:
    # Odd sizes, sizes below the rank count and zero at small P; one odd large size at every P.
    return (0, 1, p - 1, 7, 1001) if p <= 12 else (p - 1, 1001)


@pytest.mark.parametrize("collective", COLLECTIVE_NAMES)
@pytest.mark.parametrize("num_ranks", RANKS)
def test_every_algorithm_verifies(collective, num_ranks):
    roots = sorted({0, num_ranks - 1, num_ranks // 2}) if collective in (REDUCE, BROADCAST) else [0]
    failures = []
    for spec in verify_specs(collective, num_ranks):
        for count in _counts(num_ranks):
            for root in roots:
                result = verify(build_schedule(collective, spec, num_ranks, max(count, 0), root))
                if not result.ok:
                    failures.append((spec, count, root, result.errors[0]))
    assert not failures, failures[:5]
