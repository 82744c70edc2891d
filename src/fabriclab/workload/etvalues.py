"""The values of an untrusted Chakra trace, typed and bounded before they become rank graphs.

A `.et` file decodes into attributes of any kind (`workload/etfile.py`): a rank written as a string, a
`comm_size` of inf or -5, a NaN duration, a send to rank 7 of a 4-rank trace. Read as they came they gave
"invalid literal for int()" with no file or field named, "step: nan ms" with exit 0, or a send to a rank
that does not exist, costed. Every value `workload/chakra.py` takes from a file goes through one of these
readers; a ValueError names the field and what to give, and the reader of the file adds the file and node.

Try it: `python -c "from fabriclab.workload.etvalues import whole; whole(float('inf'), 'comm_size')"`.
"""

from __future__ import annotations

import math

INT64_MAX = (1 << 63) - 1
# The ranks a trace may have (from its metadata, its file names, --num-gpus or a group): the largest GPU
# count the library model costs a collective on (nccl/layout.py MAX_CLUSTER_GPUS: about a minute and 4 GB
# there). `chakra run t.1000000000.et` took the rank count from the file name and ran out of memory.
MAX_TRACE_RANKS = 131072


def whole(value: object, what: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """`value` as an int from `minimum` to `maximum`; an integral float (a foreign writer's double) is taken,
    a string, bool, NaN, inf, fraction or anything else is a ValueError naming `what`."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ValueError(f"{what} {value!r}: give a whole number from {minimum:,} to {maximum:,}")
    return value


def number(value: object, what: str) -> float:
    """`value` as a finite float >= 0 (durations, FLOPs, bytes); else a ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} {value!r}: give a finite number >= 0")
    return float(value)


def text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} {value!r}: give a string")
    return value


def texts(value: object, what: str) -> list[str]:
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"{what} {value!r}: give a list of strings")
    return [text(v, what) for v in value]


def ranks(value: object, what: str, num_ranks: int) -> list[int]:
    """A list of ranks of a `num_ranks`-rank trace, each once."""
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"{what} {value!r}: give a list of ranks")
    out = [whole(v, what, maximum=num_ranks - 1) for v in value]
    if len(set(out)) != len(out):
        raise ValueError(f"{what} {list(value)[:8]}: a rank appears twice; give each rank once")
    return out


def peer(value: object, what: str, num_ranks: int) -> int:
    """The other rank of a send or receive: a rank of the trace (a send to a rank that does not exist was
    costed as if it did)."""
    if value is None:
        raise ValueError(f"{what} is missing: a send or receive names the other rank")
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value < num_ranks:
        raise ValueError(f"{what} {value}: not a rank of this {num_ranks}-rank trace (0 to {num_ranks - 1}); give "
                         f"--num-gpus for a trace of more ranks than its files")
    return whole(value, what, maximum=num_ranks - 1)
