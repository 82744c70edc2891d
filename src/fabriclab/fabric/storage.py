"""The cluster's storage path: where a training job writes and reads its checkpoints, and how fast.

Two rates bound a checkpoint (`whatif/goodput/checkpoint.py`): each server's own path to the file system
(its storage NICs) and the file system's total. A job of S servers writes at most S x `per_server_Bps` and
at most `total_Bps`, whichever is less; the slowest server (the one holding the largest share of the state)
may bound it before either.

The default is the path of Meta's Llama 3 405B run, the run `docs/goodput.md` checks the model on:

* total: Tectonic, Meta's distributed file system, "240 PB of storage out of 7,500 servers equipped with
  SSDs ... a sustainable throughput of 2 TB/s and a peak throughput of 7 TB/s" (Dubey et al., "The Llama 3
  Herd of Models", 2024, section 3.3.1). The sustained 2 TB/s is taken, for writes and reads alike.
* per server: the two storage ports of a DGX H100 (NVIDIA DGX H100 data sheet: besides the eight compute
  ConnectX-7, "2x dual-port QSFP112 NVIDIA ConnectX-7 VPI, up to 400 Gb/s" for storage and in-band
  management), 2 x 400 Gb/s = 100 GB/s.

A cluster file holds it as its `storage` section (left out while it is this default).

Try it: `python -c "from fabriclab.fabric.storage import StorageSpec; print(StorageSpec())"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Dubey et al. 2024, section 3.3.1 (Tectonic's sustained throughput); module doc.
TECTONIC_SUSTAINED_Bps = 2e12
# NVIDIA DGX H100 data sheet: two storage ConnectX-7 ports at 400 Gb/s; module doc.
DGX_H100_STORAGE_Bps = 2 * 400e9 / 8
DEFAULT_SOURCE = ("Llama 3's Tectonic, 2 TB/s sustained (Dubey et al. 2024, section 3.3.1); per server a DGX "
                  "H100's two 400 Gb/s storage ports (NVIDIA DGX H100 data sheet)")


@dataclass(frozen=True, kw_only=True)
class StorageSpec:
    """The storage path checkpoints take (module doc)."""

    per_server_Bps: float = DGX_H100_STORAGE_Bps
    """What one server writes or reads to the file system at most, bytes/s (its storage NICs)."""
    total_Bps: float = TECTONIC_SUSTAINED_Bps
    """What the file system takes from all servers together at most, bytes/s (sustained, not peak)."""
    source: str = DEFAULT_SOURCE
    """Where the two rates come from."""

    def rate_Bps(self, num_servers: int) -> float:
        """The rate `num_servers` servers write or read together: the lesser of their paths and the total."""
        return min(num_servers * self.per_server_Bps, self.total_Bps)


def check_storage(storage: StorageSpec, where: str) -> None:
    """ValueError naming the field when a rate is not a positive number."""
    for key in ("per_server_Bps", "total_Bps"):
        value = getattr(storage, key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"cluster file {where}: storage.{key} is {value!r}; give the storage path's rate in "
                             f"bytes/s, > 0 (e.g. {getattr(StorageSpec(), key):g})")
    if not isinstance(storage.source, str):
        raise ValueError(f"cluster file {where}: storage.source is {storage.source!r}; give a text")
