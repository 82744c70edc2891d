"""Parse the quantities users type (sizes, bandwidths, times, ratios, sweeps) into base units.

Internally fabriclab works in bytes, seconds and bytes per second; this module is the one place that
turns `64KB`, `25Gbps`, `0.2us` or `1/4` into those, and it rejects anything else with a message that
shows what was given and which forms are accepted. Conventions:

* **Sizes are binary**: K, M, G, T mean 1024, 1024**2, ... with or without the `i` (`64KB == 64KiB ==
  64K == 65536` bytes), as nccl-tests reads its `-b`/`-e` sizes. The unit is an upper-case `B` or
  nothing; a lower-case `b` would be bits and is refused.
* **Bandwidths are decimal**, the network convention: `25Gbps` is 25e9 bits/s = 3.125e9 bytes/s,
  `4GB/s` is 4e9 bytes/s. An explicit `i` (`4GiB/s`) is binary. A bare number is refused: bits or bytes?
* **Times** take `ns`, `us` (or `µs`), `ms`, `s`; a bare number is seconds.
* **Ratios** are `a/b` or a decimal in (0, 1], e.g. a fat tree's bisection `1/4`.
* **Size ranges** are `start:end` (a powers-of-two sweep like nccl-tests `-b 4 -e 256M -f 2`),
  `start:end:xF` (factor F) or an explicit comma list `1KB,64KB,1MB`.
* **Integer lists** (rank counts, element counts) are `3`, `1-64`, `1,2,4,8` or a mix `1-4,16`.

Try it: `fabriclab collectives verify --algo ring --ranks 1-8 --counts 0,1,7,1001`.
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = r"(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
_PREFIX_EXP = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}

_SIZE_RE = re.compile(_NUMBER + r"\s*(?P<prefix>[kKmMgGtTpP]?)(?P<i>i?)(?P<unit>B?)")
_BANDWIDTH_RE = re.compile(
    _NUMBER + r"\s*(?P<prefix>[kKmMgGtTpP]?)(?P<i>i?)(?P<unit>bps|bit/s|b/s|Bps|B/s|byte/s)")
_TIME_RE = re.compile(_NUMBER + r"\s*(?P<unit>ns|us|µs|ms|s|)")
_TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0}

SIZE_FORMS = "a byte count with an optional binary unit: 4, 4B, 64KB (=64KiB=65536 B), 256MB, 1GB, 1TB"
BANDWIDTH_FORMS = "a rate with bits or bytes per second: 25Gbps, 100Mbit/s, 4GB/s, 12.5GBps (decimal: G=1e9)"
TIME_FORMS = "a time with unit ns, us, ms or s, or plain seconds: 0.2us, 5ms, 1s, 60"
RATIO_FORMS = "a fraction in (0, 1]: 1/4, 0.25, 1"
SIZE_RANGE_FORMS = ("start:end (powers-of-two sweep), start:end:xF (factor F >= 2) "
                    "or a comma list, e.g. 4B:256MB, 1KB:16MB:x4, 1KB,64KB,1MB")
INT_LIST_FORMS = "one number, a range or a comma list: 3, 1-64, 1,2,4,8, 1-4,16"

# The physical range of a network link, checked where users give one (`--link`, `--bandwidth`, `--latency`):
# no fabric is slower than 1 kbit/s or near 1 Pbit/s (the fastest NICs run 800 Gbit/s), and no per-link or
# per-message latency reaches 10 s; a value outside is a typo (`1e-300Gbps`) that would print a time
# hundreds of digits long. The parsers themselves take any positive rate (`8bps` is 1 B/s).
MIN_LINK_BANDWIDTH_BPS = 1e3 / 8
MAX_LINK_BANDWIDTH_BPS = 1e15 / 8
MAX_LINK_LATENCY_S = 10.0


def _clean(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"invalid {what} {text!r}: expected text")
    return text.strip()


def _match(regex: re.Pattern[str], text: str, what: str, forms: str) -> re.Match[str]:
    m = regex.fullmatch(text)
    if m is None:
        raise ValueError(f"invalid {what} {text!r}: expected {forms}")
    return m


def parse_size(text: str) -> int:
    """Bytes in a size such as `4B`, `64KB`, `1GiB` or `4096`; binary prefixes (1KB = 1024 B)."""
    text = _clean(text, "size")
    m = _match(_SIZE_RE, text, "size", SIZE_FORMS)
    if m["i"] and not m["prefix"]:
        raise ValueError(f"invalid size {text!r}: expected {SIZE_FORMS}")
    exact = Fraction(m["num"]) * 1024 ** _PREFIX_EXP[m["prefix"].lower()]
    if exact.denominator != 1:
        raise ValueError(f"invalid size {text!r}: it is {float(exact):g} bytes, not a whole number")
    return int(exact)


def parse_bandwidth(text: str) -> float:
    """Bytes per second in a bandwidth such as `25Gbps`, `100Mbit/s` or `4GB/s` (decimal prefixes)."""
    text = _clean(text, "bandwidth")
    m = _match(_BANDWIDTH_RE, text, "bandwidth", BANDWIDTH_FORMS)
    if m["i"] and not m["prefix"]:
        raise ValueError(f"invalid bandwidth {text!r}: expected {BANDWIDTH_FORMS}")
    base = 1024 if m["i"] else 1000
    value = float(m["num"]) * base ** _PREFIX_EXP[m["prefix"].lower()]
    if m["unit"] in ("bps", "bit/s", "b/s"):
        value /= 8
    if value <= 0:
        raise ValueError(f"invalid bandwidth {text!r}: it must be greater than zero")
    return value


def parse_time(text: str) -> float:
    """Seconds in a time such as `0.2us`, `5ms`, `1s` or `60` (plain seconds); zero is allowed."""
    text = _clean(text, "time")
    m = _match(_TIME_RE, text, "time", TIME_FORMS)
    return float(m["num"]) * _TIME_SCALE[m["unit"]]


def check_link_bandwidth(bandwidth_Bps: float, option: str, text: str) -> float:
    """`bandwidth_Bps` if it is within a link's physical range (1 kbit/s to 1 Pbit/s), else a ValueError
    naming `option` and the `text` given for it."""
    if not MIN_LINK_BANDWIDTH_BPS <= bandwidth_Bps <= MAX_LINK_BANDWIDTH_BPS:  # NaN fails too
        raise ValueError(f"{option} {text!r} is {bandwidth_Bps * 8:.3g} bit/s: give a rate from 1 kbit/s to "
                         f"1 Pbit/s, e.g. 25Gbps or 4GB/s")
    return bandwidth_Bps


def check_link_latency(latency_s: float, option: str, text: str) -> float:
    """`latency_s` if it is within [0, 10 s], else a ValueError naming `option` and the `text` given."""
    if not 0.0 <= latency_s <= MAX_LINK_LATENCY_S:
        raise ValueError(f"{option} {text!r} is {latency_s:.3g} s: give a latency from 0 to "
                         f"{MAX_LINK_LATENCY_S:g} s, e.g. 0.2us or 5us")
    return latency_s


def parse_ratio(text: str) -> float:
    """A fraction in (0, 1] written `1/4`, `0.25` or `1`, as a float."""
    return float(parse_fraction(text))


def parse_fraction(text: str) -> Fraction:
    """A fraction in (0, 1] written `1/4`, `0.25` or `1`, exact: the one parser of ratios (bisections)."""
    text = _clean(text, "ratio")
    num, sep, den = text.partition("/")
    number = re.compile(_NUMBER)
    if not number.fullmatch(num.strip()) or (sep and not number.fullmatch(den.strip())):
        raise ValueError(f"invalid ratio {text!r}: expected {RATIO_FORMS}")
    if sep and Fraction(den.strip()) == 0:
        raise ValueError(f"invalid ratio {text!r}: the denominator is zero")
    value = Fraction(num.strip()) / (Fraction(den.strip()) if sep else 1)
    if not 0 < value <= 1:
        raise ValueError(f"invalid ratio {text!r}: it is {float(value):g}; expected {RATIO_FORMS}")
    return value


def parse_size_range(text: str) -> list[int]:
    """Sizes in bytes of a sweep `4B:256MB` (x2 steps), `1KB:16MB:x4`, a list `1KB,1MB` or one size.

    The sweep starts at `start` and multiplies by the factor while it stays <= `end`, like nccl-tests
    `-b start -e end -f factor`; `end` itself is included only when the sweep lands on it."""
    text = _clean(text, "size range")
    if "," in text:
        return [parse_size(part) for part in _parts(text, "size range", SIZE_RANGE_FORMS)]
    fields = text.split(":")
    if len(fields) == 1:
        return [parse_size(text)]
    if len(fields) > 3 or not all(f.strip() for f in fields):
        raise ValueError(f"invalid size range {text!r}: expected {SIZE_RANGE_FORMS}")
    start, end = parse_size(fields[0]), parse_size(fields[1])
    factor = 2
    if len(fields) == 3:
        m = re.fullmatch(r"x([0-9]+)", fields[2].strip())
        if m is None or int(m[1]) < 2:
            raise ValueError(f"invalid size range {text!r}: the factor must be written xF with "
                             f"a whole F >= 2, e.g. x2 or x4")
        factor = int(m[1])
    if start < 1:
        raise ValueError(f"invalid size range {text!r}: a sweep must start at 1 byte or more")
    if start > end:
        raise ValueError(f"invalid size range {text!r}: the start is larger than the end")
    sizes = [start]
    while sizes[-1] * factor <= end:
        sizes.append(sizes[-1] * factor)
    return sizes


def parse_int_list(text: str, *, minimum: int = 0, what: str = "number list",
                   maximum: int | None = None) -> list[int]:
    """Sorted distinct integers of `3`, `1-64`, `1,2,4,8` or `1-4,16`, each >= `minimum` (and <= `maximum`,
    checked before a range is expanded, so `1-1000000000000` is an error, not a hang)."""
    text = _clean(text, what)
    values: set[int] = set()
    for part in _parts(text, what, INT_LIST_FORMS):
        m = re.fullmatch(r"([0-9]+)(?:\s*-\s*([0-9]+))?", part)
        if m is None:
            raise ValueError(f"invalid {what} {text!r}: expected {INT_LIST_FORMS}")
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        if lo > hi:
            raise ValueError(f"invalid {what} {text!r}: range {part!r} runs backwards; write {hi}-{lo}")
        if lo < minimum:
            raise ValueError(f"invalid {what} {text!r}: values start at {minimum}, got {lo}")
        if maximum is not None and hi > maximum:
            raise ValueError(f"invalid {what} {text!r}: {hi} is more than the limit of {maximum}")
        values.update(range(lo, hi + 1))
    return sorted(values)


def parse_rank_range(text: str, maximum: int | None = None) -> list[int]:
    """Rank counts (each >= 1, <= `maximum`) of `3`, `1-64`, `1,2,4,8` or `1-4,16`, sorted and distinct."""
    return parse_int_list(text, minimum=1, what="rank count", maximum=maximum)


def format_int_list(values: list[int]) -> str:
    """Inverse of `parse_int_list`: `[1, 2, 3, 5, 8, 9]` -> `1-3,5,8-9`."""
    out: list[str] = []
    items = sorted(set(values))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


def format_size(size_bytes: int) -> str:
    """Shortest exact binary form of a size: 1024 -> `1KB`, 1536 -> `1536B`, 3 << 20 -> `3MB`."""
    for prefix, exp in (("T", 4), ("G", 3), ("M", 2), ("K", 1)):
        if size_bytes and size_bytes % 1024 ** exp == 0:
            return f"{size_bytes // 1024 ** exp}{prefix}B"
    return f"{size_bytes}B"


def _parts(text: str, what: str, forms: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise ValueError(f"invalid {what} {text!r}: empty item; expected {forms}")
    return parts
