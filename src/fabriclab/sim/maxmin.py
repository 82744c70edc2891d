"""Max-min fair bandwidth sharing by progressive filling (water-filling), vectorized with numpy.

All unfrozen flows grow at the same rate until some link is full; the flows crossing a full link
are frozen at that rate; repeat (Bertsekas & Gallager, "Data Networks", section 6.5.2). Each round
freezes at least one link, so it ends after at most as many rounds as there are distinct bottlenecks,
which symmetric traffic keeps small.

Try it: `python -m pytest tests/sim/test_maxmin.py`.
"""

from __future__ import annotations

import numpy as np

# Relative slack under which a link counts as full: guards float round-off, far below any
# bandwidth difference a topology expresses.
FULL_REL = 1e-9


def max_min_rates(entry_flow: np.ndarray, entry_link: np.ndarray, num_flows: int,
                  capacity_Bps: np.ndarray, entry_users: np.ndarray | None = None) -> np.ndarray:
    """Rates (bytes/s) of `num_flows` flows; entry i says flow `entry_flow[i]` crosses `entry_link[i]`.

    `entry_users` (optional): entry i stands for that many flows, all at the flow's rate, on one link of
    its column; a class of identical flows is then solved as one (`sim/batch.py`). Without it every entry
    is one flow. A flow that crosses no link gets rate `inf` (it is limited by nothing in the network)."""
    rates = np.zeros(num_flows)
    if num_flows == 0:
        return rates
    remaining = capacity_Bps.astype(np.float64, copy=True)
    frozen = np.zeros(num_flows, dtype=bool)
    has_link = np.bincount(entry_flow, minlength=num_flows) > 0
    rates[~has_link] = np.inf
    frozen[~has_link] = True
    ef, el, ew = entry_flow, entry_link, entry_users
    num_links = capacity_Bps.shape[0]
    if el.size:
        # The links the flows cross, renumbered, so each round works on those only (the same arithmetic link
        # by link: the answer does not change; one pass over the entries, where a round over every link of a
        # large topology costs more).
        mark = np.zeros(num_links, dtype=bool)
        mark[el] = True
        used_links = np.flatnonzero(mark)
        el = (np.cumsum(mark) - 1)[el]
        remaining, capacity_Bps, num_links = remaining[used_links], capacity_Bps[used_links], used_links.size
    while ef.size:
        users = np.bincount(el, minlength=num_links) if ew is None else np.bincount(el, ew, num_links)
        used = users > 0
        share = np.full(num_links, np.inf)
        share[used] = remaining[used] / users[used]
        level = share.min()
        rates[~frozen] += level
        remaining[used] -= level * users[used]
        full = used & (remaining <= FULL_REL * capacity_Bps)
        newly = np.zeros(num_flows, dtype=bool)
        newly[ef[full[el]]] = True
        newly &= ~frozen
        frozen |= newly
        keep = ~frozen[ef]
        ef, el = ef[keep], el[keep]
        ew = None if ew is None else ew[keep]
    return rates
