"""NCCL's environment variables that decide which algorithms and protocols it may run.

A cluster's `library.nccl_env` holds the variables its runs were made with, as NCCL reads them
(`src/graph/tuning.cc`, `parseList` / `ncclTopoTuneModel`; `src/transport/nvls.cc`):

* `NCCL_ALGO`: a comma list of Ring, Tree, CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT (any case);
  a leading `^` turns the listed ones off instead. From 2.24 also per collective:
  `ring,tree;allreduce:tree;allgather:^pat` (a first part without a collective for every collective; a
  collective no part names keeps every algorithm).
* `NCCL_PROTO`: a comma list of LL, LL128, Simple, or `^` and the ones turned off; per collective as above.
* `NCCL_PXN_DISABLE=1`: a message to another server leaves through the sender's own NIC, not over NVLink
  through the NIC on the receiver's rail (`fabric/rail.py`: on a rail-optimised fabric it crosses the spines).
* `NCCL_NVLS_ENABLE=0`: no NVLS and no NVLS-tree.
* `NCCL_BUFFSIZE`: the Simple protocol's buffer per connection (default 4 MiB): a tree's chunk is an eighth
  of it (NCCL_STEPS), which decides how long its pipeline takes to fill (`nccl/pipeline.py`).

Clouds set them for their transports: Google's GPUDirect-TCPXO (A3 Mega) enforces `NCCL_ALGO=Ring,Tree`,
`NCCL_PROTO=Simple`, `NCCL_NVLS_ENABLE=0` and `NCCL_BUFFSIZE=8388608` (its guest-config checker; "TCPX only supports Simple
protocol"). Other variables are not modelled: a file naming one is refused, so that no run is taken to
have been made with settings the model ignores.

Try it: `fabriclab simulate collective --cluster examples/nccl-corpus/gcp-a3mega-h100/cluster.json --gpus 16`.
"""

from __future__ import annotations

ALGORITHM_NAMES = {"ring": "ring", "tree": "tree", "collnetdirect": "collnet_direct",
                   "collnetchain": "collnet_chain", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
"""NCCL's spelling (lower case) -> fabriclab's algorithm name."""
PROTOCOL_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
"""NCCL's spelling (lower case) -> fabriclab's protocol name."""
COLLECTIVE_NAMES = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter",
                    "broadcast": "broadcast", "reduce": "reduce"}
"""NCCL_ALGO's per-collective keys -> fabriclab's collective names."""
MODELLED = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_BUFFSIZE", "NCCL_PXN_DISABLE")


def _names(items_text: str, value: str, table: dict[str, str], variable: str) -> tuple[bool, set[str]]:
    """(exclude, names) of one comma list (`items_text`, a part of the whole `value`), `^` first to exclude."""
    text = items_text.strip()
    exclude = text.startswith("^")
    items = [w.strip() for w in text.removeprefix("^").split(",") if w.strip()]
    if not items:
        raise ValueError(f"{variable}={value!r}: give a comma list of {', '.join(_spelled(table))}")
    out = set()
    for item in items:
        name = table.get(item.lower())
        if name is None:
            raise ValueError(f"{variable}={value!r}: {item!r} is not one of {', '.join(_spelled(table))}")
        out.add(name)
    return exclude, out


def _spelled(table: dict[str, str]) -> list[str]:
    spelling = {"ring": "Ring", "tree": "Tree", "collnetdirect": "CollnetDirect", "collnetchain": "CollnetChain",
                "nvls": "NVLS", "nvlstree": "NVLSTree", "pat": "PAT", "ll": "LL", "ll128": "LL128",
                "simple": "Simple"}
    return [spelling[k] for k in table]


def _chosen(items_text: str, value: str, table: dict[str, str], variable: str) -> frozenset[str]:
    exclude, names = _names(items_text, value, table, variable)
    return frozenset(set(table.values()) - names if exclude else names)


def _allowed(env: dict[str, str], variable: str, table: dict[str, str], collective: str) -> frozenset[str]:
    """What `variable` (NCCL_ALGO or NCCL_PROTO) leaves on for `collective`, as NCCL's parser reads it: a
    comma list, or (2.24+) `;`-separated parts, the first of which may name no collective (every
    collective's list), the others `collective:list` for that collective."""
    out = frozenset(table.values())
    value = env.get(variable)
    if value is None:
        return out
    if ":" not in value:
        return _chosen(value, value, table, variable)
    for i, part in enumerate(p for p in value.split(";") if p.strip()):
        coll, colon, names = part.partition(":")
        if not colon:
            if i:
                raise ValueError(f"{variable}={value!r}: {part.strip()!r} has no collective; only the first part "
                                 f"may be a list for every collective")
            out = _chosen(part, value, table, variable)
            continue
        key = COLLECTIVE_NAMES.get(coll.strip().lower())
        if key is None:
            raise ValueError(f"{variable}={value!r}: {part.strip()!r} is not COLLECTIVE:LIST with a collective of "
                             f"{', '.join(COLLECTIVE_NAMES)}")
        chosen = _chosen(names, value, table, variable)
        if key == collective:
            out = chosen
    return out


def allowed_algorithms(env: dict[str, str], collective: str) -> frozenset[str]:
    """The algorithms NCCL may run `collective` with under `env` (every one when nothing restricts it)."""
    out = _allowed(env, "NCCL_ALGO", ALGORITHM_NAMES, collective)
    if str(env.get("NCCL_NVLS_ENABLE", "")).strip() == "0":
        out = out - {"nvls", "nvls_tree"}
    return out


def allowed_protocols(env: dict[str, str], collective: str = "allreduce") -> frozenset[str]:
    """The protocols NCCL may use for `collective` under `env`."""
    return _allowed(env, "NCCL_PROTO", PROTOCOL_NAMES, collective)


def simple_buffer_bytes(env: dict[str, str]) -> int | None:
    """Simple's buffer per connection NCCL_BUFFSIZE sets, bytes; None: NCCL's default."""
    value = env.get("NCCL_BUFFSIZE")
    return None if value is None else int(value.strip())


def permitted(env: dict[str, str], collective: str, algorithm: str, protocol: str) -> bool:
    """Whether `env` lets NCCL run `collective` with `algorithm` / `protocol` (point-to-point always)."""
    if not env or algorithm == "p2p":
        return True
    return algorithm in allowed_algorithms(env, collective) and protocol in allowed_protocols(env, collective)


def check_nccl_env(env: object, where: str) -> None:
    """ValueError naming the variable and what to give when `env` is not a mapping of modelled variables
    with values NCCL accepts."""
    if not isinstance(env, dict):
        raise ValueError(f"{where}: library.nccl_env is {env!r}: give an object like "  # noqa: TRY004
                         f'{{"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple"}}')
    for key, value in env.items():
        if key not in MODELLED:
            raise ValueError(f"{where}: library.nccl_env has {key}: the model reads only {', '.join(MODELLED)}; "
                             f"leave the others out (say them in the cluster's description)")
        if not isinstance(value, str):
            raise ValueError(f"{where}: library.nccl_env {key} is {value!r}: give the value as NCCL reads it, "
                             f"a string")
    if "NCCL_BUFFSIZE" in env:
        text = env["NCCL_BUFFSIZE"].strip()
        if not text.isdigit() or not 65536 <= int(text) <= 1 << 30:
            raise ValueError(f"{where}: NCCL_BUFFSIZE={env['NCCL_BUFFSIZE']!r}: give bytes as a whole number from "
                             f"65536 to 1073741824 (NCCL's default is 4194304)")
    if "NCCL_PXN_DISABLE" in env and env["NCCL_PXN_DISABLE"].strip() not in ("0", "1"):
        raise ValueError(f"{where}: NCCL_PXN_DISABLE={env['NCCL_PXN_DISABLE']!r}: give 1 (a message to another "
                         f"server leaves through the sender's own NIC) or 0 (PXN, NCCL's default)")
    if "NCCL_NVLS_ENABLE" in env and env["NCCL_NVLS_ENABLE"].strip() not in ("0", "1", "2"):
        raise ValueError(f"{where}: NCCL_NVLS_ENABLE={env['NCCL_NVLS_ENABLE']!r}: give 0 (off), 1 or 2")
    try:
        for coll in COLLECTIVE_NAMES.values():
            allowed_algorithms(env, coll)
            allowed_protocols(env, coll)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def parse_assignments(items: list[str]) -> dict[str, str]:
    """`["NCCL_ALGO=Ring,Tree", ...]` (a CLI's repeated option) -> the mapping, checked."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--nccl-env {item!r}: give VARIABLE=VALUE, e.g. NCCL_PROTO=Simple")
        out[key.strip()] = value.strip()
    check_nccl_env(out, "--nccl-env")
    return out
