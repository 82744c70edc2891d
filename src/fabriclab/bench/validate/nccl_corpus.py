"""The corpus of real nccl-tests runs: one folder per cluster, read into runs and a calibration request.

Every cluster folder of `examples/nccl-corpus/` holds `corpus.json` (where the logs come from, what the
poster said about the setup, the hardware, each run's GPUs and servers, and which runs are fitted and which
predicted), the logs, and `cluster.json`: the prior cluster file its hardware gives (`corpus_prior`; a test
keeps the two in step). Logs of posts without a licence keep only the nccl-tests header, NCCL's version
line and the numeric rows; their rank list (which host ran which rank) is the manifest's `servers` x
`gpus_per_server`, written in front of the table here (`with_ranks`) as nccl-tests prints it.

A cluster is judged in one of two ways (`split` in the manifest):
* `gpus`: fit its runs of the GPU counts (or files) in `fit`, predict those in `predict` (the larger ones,
  or another collective at the same scale);
* `sizes`: one run only; its rows in `hold_out` (bytes, smallest and largest) are predicted, the others
  fitted (the run's small and large sizes teach the latencies and the NIC, the middle is predicted).

`fabriclab calibrate nccl-tests` reads a corpus log with its manifest too (`read_logs`): the rank list and
the servers come from the cluster it names.

Try it: `python -m fabriclab.bench.validate.nccl_corpus examples/nccl-corpus` (`--write-clusters` writes
every `cluster.json` again from the manifests), or `fabriclab calibrate nccl-tests
examples/nccl-corpus/h100-ndr-8node/allreduce_16.log --out h100.json`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from fabriclab.fabric.cluster import ClusterModel, load_cluster, save_cluster
from fabriclab.fabric.gpus import same_gpu
from fabriclab.fabric.links import parse_link
from fabriclab.fabric.nccl_tuner import rules_from_json
from fabriclab.nccl.calibration import CalibrationRequest, prior_for
from fabriclab.nccl.logs import NcclRun, collective_name, parse_nccl_tests
from fabriclab.textfile import read_text

MANIFEST = "corpus.json"
CLUSTER_FILE = "cluster.json"
SPLITS = ("gpus", "sizes")


@dataclass(frozen=True, kw_only=True)
class CorpusRun:
    """One log of a cluster and what the manifest says about it."""

    file: str
    """Log file, relative to the cluster folder."""
    gpus: int
    """GPUs (ranks) of the run."""
    servers: int
    """Servers the ranks ran on."""
    collective: str
    """nccl-tests binary's collective (allreduce, ...); for a log of several tests, the first of them."""
    collectives: tuple[str, ...] = ()
    """Every test of the log, in its order (`collectives` in the manifest: the scripts that run five tests
    into one log); a log of one test gives `(collective,)`."""
    note: str = ""
    """What is special about the run (partial, settings, ...)."""


@dataclass(frozen=True, kw_only=True)
class CorpusCluster:
    """One cluster of the corpus, read from its folder."""

    name: str
    """Folder name."""
    folder: Path
    """Where it lives."""
    manifest: dict
    """`corpus.json` as read."""
    runs: tuple[CorpusRun, ...]
    """Its logs."""

    @property
    def hardware(self) -> dict:
        return self.manifest["hardware"]

    @property
    def degraded(self) -> str:
        """Why the cluster was measured degraded (`health.degraded`, checked text when the folder is read);
        "" for a healthy one."""
        return (self.manifest.get("health") or {}).get("degraded") or ""

    @property
    def split(self) -> str:
        return self.manifest["split"]

    def run_objects(self) -> dict[str, list[NcclRun]]:
        """Every log parsed, by file name."""
        return {r.file: read_corpus_run(self, r) for r in self.runs}

    def request(self) -> CalibrationRequest:
        """The calibration that judges this cluster: fit what `fit` names, predict the rest."""
        parsed = self.run_objects()
        if self.split == "gpus":
            fit = [run for r in self.runs if _named(r, self.manifest["fit"]) for run in parsed[r.file]]
            held = [run for r in self.runs if _named(r, self.manifest["predict"]) for run in parsed[r.file]]
            hold_range = None
        else:
            fit, held = [], [run for runs in parsed.values() for run in runs]
            lo, hi = self.manifest["hold_out"]
            hold_range = (int(lo), int(hi))
        return CalibrationRequest(runs=tuple(fit), held=tuple(held), hold_out_range=hold_range, name=self.name,
                                  log_names=tuple(r.file for r in self.runs), **self.servers())

    def servers(self) -> dict:
        """What the manifest's hardware says that the logs do not, as `CalibrationRequest` fields: the NIC and
        how many, GPUs per server, the inside and the network, NCCL's version, settings and tuner (the NIC is
        the poster's, so a fit is not refused for missing it: `check_nic` off)."""
        hw = self.hardware
        return {"nic": parse_link(hw["nic"]), "nics_per_server": hw["nics_per_server"],
                "gpus_per_server": hw["gpus_per_server"], "intra": hw.get("intra", "nvswitch"),
                "fabric": hw.get("fabric", "rail"), "check_nic": False,
                "nccl_version": hw.get("nccl_version") or hw.get("model_nccl_version"),
                "nccl_env": dict(hw.get("nccl_env", {})),
                "tuner": rules_from_json((hw.get("nccl_tuner") or {}).get("rules", []),
                                         f"{self.folder / MANIFEST}: hardware.nccl_tuner")}


def _named(run: CorpusRun, names: list) -> bool:
    """Whether `fit` / `predict` names the run: by its GPU count, or by its file name."""
    return run.gpus in names or run.file in names


def with_ranks(text: str, run: CorpusRun, device: str) -> str:
    """`text` with nccl-tests' rank list after its `# nThread` line where the kept log has none: rank r on
    host `server-<r // gpus_per_server>`, as the manifest's servers and GPUs say."""
    if "# Using devices" in text:
        return text
    per = run.gpus // run.servers
    ranks = [f"#  Rank {r:2d} Group  0 Pid 0 on server-{r // per:03d} device {r % per:2d} [0x00] {device}"
             for r in range(run.gpus)]
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if "# nThread" in line), None)
    if at is None:
        raise ValueError(f"{run.file}: no '# nThread ... nGpus ...' header line: keep nccl-tests' header")
    return "\n".join([*lines[:at + 1], "# Using devices", *ranks, *lines[at + 1:]]) + "\n"


def read_corpus_run(cluster: CorpusCluster, run: CorpusRun) -> list[NcclRun]:
    """The runs of one log, checked against what the manifest says of its GPUs and servers."""
    path = cluster.folder / run.file
    try:
        text = read_text(path, "log")
    except OSError as exc:
        raise ValueError(f"cannot read {path} ({MANIFEST} of {cluster.name}): {exc.strerror or exc}") from None
    text = with_ranks(text, run, cluster.hardware["gpu"])
    runs = parse_nccl_tests(text, str(path), collective=run.collective)
    for r in runs:
        if r.num_ranks != run.gpus or r.num_servers != run.servers:
            raise ValueError(f"{path}: the log has {r.num_ranks} ranks on {r.num_servers} servers, {MANIFEST} "
                             f"says {run.gpus} on {run.servers}: correct the manifest")
        if r.device_name and not same_gpu(r.device_name, cluster.hardware["gpu"]):
            raise ValueError(f"{path}: the log ran on {r.device_name!r}, {MANIFEST} says hardware.gpu "
                             f"{cluster.hardware['gpu']!r}: correct the manifest")
    found = tuple(r.collective for r in runs)
    if found != run.collectives:
        raise ValueError(f"{path}: the log holds {', '.join(found)}, {MANIFEST} says {', '.join(run.collectives)}: "
                         f"correct the manifest's collective(s)")
    return runs


def read_logs(paths: list[Path]) -> tuple[tuple[NcclRun, ...], CorpusCluster | None]:
    """The runs of nccl-tests logs (`fabriclab calibrate nccl-tests`): a log of a corpus cluster folder (a
    `corpus.json` beside it that names the file) is read with its manifest, its rank list rebuilt from the
    GPUs and servers the manifest gives (`read_corpus_run`), and that cluster is returned, whose `servers()`
    say what the logs do not; other logs are read as they are. Logs of two corpus clusters are an error."""
    from fabriclab.nccl.logs import read_runs

    runs, found = [], None
    for path in paths:
        cluster = load_cluster_folder(path.parent) if (path.parent / MANIFEST).is_file() else None
        run = cluster and next((r for r in cluster.runs if (cluster.folder / r.file).resolve() == path.resolve()),
                               None)
        if not run:
            runs += read_runs(path)
            continue
        if found is not None and found.folder.resolve() != cluster.folder.resolve():
            raise ValueError(f"{path}: a log of corpus cluster {cluster.name}, beside logs of {found.name}: fit the "
                             f"logs of one cluster (its corpus.json says the servers)")
        found = cluster
        runs += read_corpus_run(cluster, run)
    return tuple(runs), found


def load_cluster_folder(folder: Path | str) -> CorpusCluster:
    """One cluster folder; a ValueError naming the file and key on a bad manifest."""
    folder = Path(folder)
    path = folder / MANIFEST
    try:
        manifest = json.loads(read_text(path))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}: a corpus cluster folder holds "
                         f"{MANIFEST}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
    for key in ("source", "said", "hardware", "runs", "split"):
        if key not in manifest:
            raise ValueError(f"{path}: no {key!r}: every cluster names its source, what the poster said, its "
                             f"hardware, its runs and how it is split")
    degraded = (manifest.get("health") or {}).get("degraded") if isinstance(manifest.get("health"), dict) else None
    if "health" in manifest and (not isinstance(manifest["health"], dict)
                                 or not (isinstance(degraded, str) or degraded in (None, False))):
        raise ValueError(f"{path}: health {manifest['health']!r}: give {{\"degraded\": \"why, in the poster's "
                         f"or the maintainers' words\"}}")
    if manifest["split"] not in SPLITS:
        raise ValueError(f"{path}: split {manifest['split']!r}: use gpus or sizes")
    runs = tuple(_corpus_run(r, path) for r in manifest["runs"])
    if manifest["split"] == "gpus":
        names = {r.gpus for r in runs} | {r.file for r in runs}
        for key in ("fit", "predict"):
            if not set(manifest.get(key, [])) or not set(manifest[key]) <= names:
                raise ValueError(f"{path}: {key} {manifest.get(key)} must name GPU counts or files of its runs "
                                 f"({', '.join(sorted(map(str, names)))})")
    elif len(manifest.get("hold_out", [])) != 2:
        raise ValueError(f"{path}: split sizes needs hold_out: [smallest, largest] bytes")
    return CorpusCluster(name=folder.name, folder=folder, manifest=manifest, runs=runs)


def _corpus_run(entry: dict, path: Path) -> CorpusRun:
    """One `runs` entry: `collective` (default allreduce) or `collectives` (a log of several tests)."""
    many = entry.get("collectives")
    if many is not None and (not isinstance(many, list) or not many or "collective" in entry):
        raise ValueError(f"{path}: run {entry.get('file')!r}: give `collective` for a log of one test or "
                         f"`collectives` (a list, in the log's order) for a log of several, not both")
    names = tuple(collective_name(str(c)) for c in many) if many else (entry.get("collective", "allreduce"),)
    return CorpusRun(file=entry["file"], gpus=int(entry["gpus"]), servers=int(entry["servers"]),
                     collective=names[0], collectives=names, note=entry.get("note", ""))


def load_corpus(root: Path | str, names: tuple[str, ...] | None = None) -> list[CorpusCluster]:
    """Every cluster folder under `root` (those in `names` only, when given), in name order."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"corpus {root}: not a folder; give the corpus folder (examples/nccl-corpus)")
    folders = sorted(p for p in root.iterdir() if (p / MANIFEST).is_file())
    if names:
        unknown = sorted(set(names) - {p.name for p in folders})
        if unknown:
            raise ValueError(f"--clusters: {', '.join(unknown)} not in {root}; it holds "
                             f"{', '.join(p.name for p in folders)}")
        folders = [p for p in folders if p.name in names]
    if not folders:
        raise ValueError(f"corpus {root}: no cluster folder with a {MANIFEST}")
    return [load_cluster_folder(p) for p in folders]


def check_cluster_file(cluster: CorpusCluster) -> None:
    """A ValueError when the folder's `cluster.json` models another GPU than its manifest's hardware.gpu: a
    wrong GPU in the manifest is otherwise fitted away (its logs name no GPU; `with_ranks` writes the
    manifest's), and the ranges still hold."""
    path = cluster.folder / CLUSTER_FILE
    if not path.is_file():
        return
    modelled, said = load_cluster(path).server.gpu_name, cluster.hardware.get("gpu", "")
    if not same_gpu(modelled, said):
        raise ValueError(f"{cluster.folder / MANIFEST}: hardware.gpu {said!r}, but {CLUSTER_FILE} beside it models "
                         f"{modelled!r}: correct the manifest, or write {CLUSTER_FILE} again from it (python -m "
                         f"fabriclab.bench.validate.nccl_corpus --write-clusters)")


def corpus_prior(cluster: CorpusCluster) -> ClusterModel:
    """The prior cluster file of a corpus cluster: its hardware from data sheets, NCCL's constants."""
    request = cluster.request()
    return prior_for(list(request.runs + request.held), request)


def write_cluster_files(root: Path | str) -> list[Path]:
    """Write every cluster's `cluster.json` from its manifest (`corpus_prior`); the paths written."""
    out = []
    for cluster in load_corpus(root):
        model = corpus_prior(cluster)
        path = cluster.folder / CLUSTER_FILE
        save_cluster(replace(model, name=cluster.name, description=f"{cluster.manifest['title']} "
                                                                   f"(corpus prior: {model.description})"), path)
        out.append(path)
    return out


def main(argv: list[str]) -> None:
    """Print each cluster's runs (a check that the corpus reads); `--write-clusters` writes cluster.json."""
    if "--write-clusters" in argv:
        argv = [a for a in argv if a != "--write-clusters"]
        for path in write_cluster_files(argv[0] if argv else "examples/nccl-corpus"):
            print(f"wrote {path}")
        return
    for cluster in load_corpus(argv[0] if argv else "examples/nccl-corpus"):
        for name, runs in cluster.run_objects().items():
            for r in runs:
                print(f"{cluster.name:28s} {name:22s} {r.collective:10s} {r.num_ranks:4d} GPUs "
                      f"{r.num_servers:3d} servers {len(r.rows):3d} rows NCCL {r.nccl_version or '?'}")


if __name__ == "__main__":
    main(sys.argv[1:])
