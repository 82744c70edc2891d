"""Switch radix: how many ports a switch of each link generation has, and the fat tree that radix forces.

A fat tree built of switches of R ports (`fabric/fattree.py`'s shapes, bisection r):

* 1 level (one switch): up to R hosts.
* 2 levels: leaves of k down-links and k*r up-links (k + k*r <= R), one up-link to each of k*r spines;
  a spine has one port per leaf, so at most R leaves: up to R * R / (1 + r) hosts (R^2/2 non-blocking).
* 3 levels: leaves of k down / k up (2k <= R), pods of p leaves whose k aggregation switches have p down
  and p*r up (p + p*r <= R), core switches with one port per pod (at most R pods): up to
  (R/2) * R/(1+r) * R hosts (R^3/4 non-blocking).

`tree_for` picks the fewest levels that fit and, within them, the largest leaves and pods that divide
the hosts evenly (fewest switches); a tree that needs 4 levels is refused with what to change.

Default radix per link preset (data sheets): 1/10/25GbE 48 (Spectrum SN2410: 48 x 25GbE), 40/100/200GbE
32 (Spectrum SN2700: 32 x 100GbE; SN3700: 32 x 200GbE), 400GbE 64 (25.6 Tb/s switches such as Arista
7060DX5-64S: 64 x 400GbE), 800GbE 64 (Spectrum-4 SN5600: 64 x 800GbE), 1600GbE 64 (102.4 Tb/s switches
such as Broadcom's Tomahawk 6: 64 x 1.6TbE), Omni-Path 100 48 (Edge Switch
100 Series: 48 ports), EDR 36 (Switch-IB 2 SB7800), HDR 40 (Quantum QM8700), NDR 64 (Quantum-2 QM9700:
64 x 400 Gb/s), XDR 144 (Quantum-X800 Q3400: 144 x 800 Gb/s). `--radix` overrides it (e.g. 128 for a
51.2 Tb/s switch split into 128 x 400G).

Try it: `python -c "from fabriclab.fabric.switches import tree_for; print(tree_for(16384, 64, 1))"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from fabriclab.fabric.links import link_preset

RADIX: dict[str, int] = {"1GbE": 48, "10GbE": 48, "25GbE": 48, "40GbE": 32, "100GbE": 32, "200GbE": 32,
                         "400GbE": 64, "800GbE": 64, "1600GbE": 64, "OPA100": 48, "EDR": 36, "HDR": 40, "NDR": 64,
                         "XDR": 144}
"""Ports of a switch of each link preset's generation (module doc)."""


def default_radix(link: str) -> int:
    """The radix of `link`'s switch generation; a ValueError asks for --radix when it is not known."""
    name = link_preset(link).name
    if name not in RADIX:
        raise ValueError(f"no switch radix known for {name}: give the switch's port count with --radix, e.g. 64")
    return RADIX[name]


@dataclass(frozen=True, kw_only=True)
class TreeChoice:
    """The tree a radix allows for a number of hosts."""

    levels: int
    """1 (one switch), 2 or 3."""
    hosts_per_leaf: int
    """Down-links of a leaf (all hosts for one switch)."""
    leaves_per_pod: int | None = None
    """Leaves per pod (3 levels)."""
    radix: int
    """Ports per switch."""


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _two_level(hosts: int, radix: int, r: Fraction) -> TreeChoice | None:
    for k in sorted(_divisors(hosts), reverse=True):
        ups = k * r
        if k + ups <= radix and ups.denominator == 1 and ups >= 1 and 2 <= hosts // k <= radix:
            return TreeChoice(levels=2, hosts_per_leaf=k, radix=radix)
    return None


def _three_level(hosts: int, radix: int, r: Fraction) -> TreeChoice | None:
    best = None
    for k in _divisors(hosts):
        if 2 * k > radix:
            break
        for p in _divisors(hosts // k):
            ups, pods = p * r, hosts // (k * p)
            if p + ups <= radix and ups.denominator == 1 and ups >= 1 and 2 <= pods <= radix:
                if best is None or (k, p) > (best.hosts_per_leaf, best.leaves_per_pod):
                    best = TreeChoice(levels=3, hosts_per_leaf=k, leaves_per_pod=p, radix=radix)
    return best


def max_hosts(levels: int, radix: int, ratio: Fraction) -> int:
    """Most hosts a tree of `levels` can take at `radix` and bisection `ratio` (module doc)."""
    r = Fraction(ratio)
    if levels == 1:
        return radix
    down = int(radix / (1 + r))
    return radix * down if levels == 2 else (radix // 2) * down * radix


def tree_for(hosts: int, radix: int, ratio: Fraction | float, levels: int | None = None) -> TreeChoice:
    """The fewest-level tree (or the `levels` asked for) of `hosts` hosts at `radix`, bisection `ratio`."""
    if not isinstance(radix, int) or radix < 4:
        raise ValueError(f"switch radix {radix!r}: give the ports of one switch, a whole number >= 4 (e.g. 64)")
    r = Fraction(ratio).limit_denominator(1 << 12)
    if levels is None and hosts <= radix or levels == 1:
        if hosts > radix:
            raise ValueError(f"{hosts} NICs do not fit one switch of {radix} ports")
        return TreeChoice(levels=1, hosts_per_leaf=hosts, radix=radix)
    tries = (2, 3) if levels is None else (levels,)
    for n in tries:
        choice = (_two_level if n == 2 else _three_level)(hosts, radix, r)
        if choice is not None:
            return choice
    top = tries[-1]
    if hosts > max_hosts(top, radix, r):
        more = "4 levels, which plan does not build" if top == 3 else "3 levels (--levels 3, or leave --levels out)"
        raise ValueError(f"{hosts} NICs exceed a {top}-level tree of {radix}-port switches at bisection {r} "
                         f"(at most {max_hosts(top, radix, r):,}): it needs {more}; or use switches with more "
                         f"ports (--radix)")
    raise ValueError(f"{hosts} NICs do not split evenly into leaves and pods of {radix}-port switches at "
                     f"bisection {r}: use a GPU count whose servers divide into whole leaves (e.g. a power of two)")
