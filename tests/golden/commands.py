"""The golden set: the commands whose `--json` records `tests/golden/data/` holds (one file per command).

Each entry is a `Command(name, argv, ...)`: `argv` follows `python -m fabriclab`, run in an empty folder of its
own. Placeholders that `harness.py` fills in:

- `{examples}`: the shipped nccl-tests logs, `examples/nccl-tests-a100/` of this repository;
- `{cluster}`: a cluster file fitted by `calibrate nccl-tests` of the code under test on all five shipped
  logs (`harness.CLUSTER_ARGV`), copied into the command's folder as `a100.json` (a relative name, so the
  records hold no temporary path).

Options keep the spellings of commit ed96716 (e.g. `--gpus-per-host`), on purpose: the old spellings stay as
hidden aliases after the restructure, and this set checks that they still work.

A command with `--json record.json` is compared on that record. `collectives list` and `collectives show`
write no record: `stdout="json-lines"` compares their `--format json` output (one table per line) instead.
`files` names output files (JSON) compared as well, `stdout="text"` the printed text (the nccl-tests table).
`keep` (bench commands only) lists the only `results` fields that count: the simulated ones, not timings.

Every command finishes in a few seconds on a 2-core machine (the slowest, `validate published`, in about 6 s);
the whole golden test takes about 1 minute there.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    name: str
    argv: list[str]
    files: tuple[str, ...] = ()
    stdout: str | None = None  # None, "json-lines" or "text"
    keep: tuple[str, ...] | None = None  # bench: the results fields that are answers (all others dropped)


J = ["--json", "record.json"]
LOGS = [f"{{examples}}/nccl_{n}.log" for n in (1, 2, 4, 8, 16)]
SIM = ["simulate", "collective"]
CL = ["--cluster", "{cluster}"]

COMMANDS: list[Command] = [
    # ---- simulate collective: algorithms x topologies x GPUs per host x engines
    Command("sim-ring-fattree2-16", [*SIM, "--algo", "ring", "--topology", "fat-tree", "--hosts", "16",
                                     "--size", "64MB", *J]),
    Command("sim-butterfly-fattree2-bis1-4", [*SIM, "--algo", "butterfly", "--topology", "fat-tree", "--hosts", "64",
                                              "--hosts-per-leaf", "8", "--bisection", "1/4", "--size", "256MB", *J]),
    Command("sim-butterfly-far-fattree2-bis1-2-ecmp", [*SIM, "--algo", "butterfly:order=far", "--hosts", "32",
                                                       "--hosts-per-leaf", "8", "--bisection", "1/2", "--routing",
                                                       "ecmp", "--seed", "3", "--size", "32MB", *J]),
    Command("sim-ring-fattree3", [*SIM, "--algo", "ring", "--topology", "fat-tree", "--levels", "3", "--hosts", "64",
                                  "--hosts-per-leaf", "4", "--leaves-per-pod", "4", "--bisection", "1/2",
                                  "--size", "64MB", *J]),
    Command("sim-rd-fattree3-random", [*SIM, "--algo", "recursive-doubling", "--levels", "3", "--hosts", "32",
                                       "--hosts-per-leaf", "4", "--placement", "random", "--seed", "7",
                                       "--size", "8MB", *J]),
    Command("sim-ring-2048-levels-engine", [*SIM, "--algo", "ring", "--topology", "fat-tree", "--hosts", "2048",
                                            "--bisection", "1/4", "--link", "4GB/s", "--latency", "0.2us",
                                            "--size", "1GB", *J]),
    Command("sim-binomial-leafspine", [*SIM, "--algo", "binomial:chunks=4", "--topology", "leaf-spine", "--hosts",
                                       "32", "--spines", "2", "--size", "16MB", *J]),
    Command("sim-ring-torus-4x4", [*SIM, "--algo", "ring", "--topology", "torus", "--dims", "4x4",
                                   "--link", "100GbE", "--size", "128MB", *J]),
    Command("sim-butterfly-ring-topology", [*SIM, "--algo", "butterfly", "--topology", "ring", "--hosts", "8",
                                            "--size", "16MB", *J]),
    Command("sim-chain-star", [*SIM, "--algo", "chain:chunks=8", "--topology", "star", "--hosts", "8",
                               "--link", "25Gbps", "--latency", "5us", "--size", "8MB", *J]),
    Command("sim-dbt-flattened-butterfly", [*SIM, "--algo", "double-binary-tree", "--topology",
                                            "flattened-butterfly", "--dims", "4x4", "--size", "32MB", *J]),
    Command("sim-hierarchical-gpus4", [*SIM, "--algo", "hierarchical:lower=chain:upper=binomial:group=4",
                                       "--hosts", "8", "--gpus-per-host", "4", "--size", "64MB", *J]),
    Command("sim-ring-gpus8-bis1-2-gamma", [*SIM, "--algo", "ring", "--hosts", "16", "--gpus-per-host", "8",
                                            "--bisection", "1/2", "--link", "HDR", "--gamma", "1e-11",
                                            "--size", "256MB", *J]),
    Command("sim-ring-gpus2-roundrobin", [*SIM, "--algo", "ring", "--hosts", "16", "--gpus-per-host", "2",
                                          "--placement", "round-robin", "--size", "64MB", *J]),
    Command("sim-ps-fattree", [*SIM, "--algo", "ps:servers=4", "--hosts", "32", "--hosts-per-leaf", "8",
                               "--bisection", "1/4", "--size", "64MB", *J]),
    Command("sim-direct-general-engine", [*SIM, "--algo", "direct", "--hosts", "16", "--engine", "general",
                                          "--ranks", "12", "--size", "12MB", "--top", "3", *J]),
    Command("sim-reduce-scatter-recursive", [*SIM, "--collective", "reduce_scatter", "--algo", "recursive",
                                             "--hosts", "16", "--size", "64MB", *J]),
    Command("sim-allgather-ring-opa", [*SIM, "--collective", "allgather", "--algo", "ring", "--hosts", "16",
                                       "--link", "OPA100", "--size", "64MB", *J]),
    Command("sim-broadcast-binomial", [*SIM, "--collective", "broadcast", "--algo", "binomial", "--hosts", "16",
                                       "--size", "64MB", *J]),
    Command("sim-reduce-chain-itemsize2", [*SIM, "--collective", "reduce", "--algo", "chain", "--hosts", "8",
                                           "--itemsize", "2", "--size", "10MB", *J]),
    # ---- simulate collective on a calibrated cluster
    Command("sim-cluster-128-sizes", [*SIM, *CL, "--gpus", "128", "--sizes", "64KB:4GB:x4", *J]),
    Command("sim-cluster-16-nccl-tests", [*SIM, *CL, "--gpus", "16", "--sizes", "1KB:1GB",
                                          "--format", "nccl-tests", *J], stdout="text"),
    Command("sim-cluster-32-list", [*SIM, *CL, "--gpus", "32", "--sizes", "1KB,64KB,1MB,64MB,1GB", *J]),
    Command("sim-cluster-8-default-sizes", [*SIM, *CL, *J]),
    # ---- simulate sweep (a small part of the fatness preset)
    Command("sweep-fatness-128-ring", ["simulate", "sweep", "--preset", "fatness", "--hosts", "128",
                                       "--methods", "ring", "--out", "sweep", *J]),
    # ---- whatif
    Command("whatif-default-ring-addest", ["whatif", "--profile", "resnet50", "--workers", "16,32,64",
                                           "--bandwidth", "1,10,25,40,100Gbps", "--compression", "1,2,5,10", *J]),
    Command("whatif-closed-form-algos", ["whatif", "--profile", "vgg16,resnet101", "--workers", "8,64",
                                         "--bandwidth", "10,100Gbps", "--cost", "closed-form",
                                         "--algo", "ring,butterfly,binomial", "--latency", "5us", *J]),
    Command("whatif-closed-form-gamma-zero-add", ["whatif", "--workers", "2-8", "--bandwidth", "25Gbps",
                                                  "--cost", "closed-form", "--gamma", "1e-10", "--add-cost", "zero",
                                                  *J]),
    Command("whatif-simulated-fattree-bis1-4", ["whatif", "--workers", "16,32", "--bandwidth", "10,100Gbps",
                                                "--cost", "simulated", "--topology", "fat-tree", "--bisection", "1/4",
                                                "--hosts-per-leaf", "8", "--latency", "1us", *J]),
    Command("whatif-simulated-leafspine-butterfly", ["whatif", "--profile", "vgg16", "--workers", "16",
                                                     "--bandwidth", "25Gbps", "--cost", "simulated", "--algo",
                                                     "butterfly", "--topology", "leaf-spine", "--spines", "2",
                                                     "--hosts-per-leaf", "4", *J]),
    Command("whatif-simulated-fattree3-ecmp", ["whatif", "--workers", "32", "--bandwidth", "40Gbps", "--cost",
                                               "simulated", "--levels", "3", "--hosts-per-leaf", "4",
                                               "--leaves-per-pod", "2", "--routing", "ecmp", *J]),
    Command("whatif-fusion-horovod-compress-add", ["whatif", "--workers", "16,64", "--bandwidth", "10,25Gbps",
                                                   "--fusion", "horovod", "--compression", "1,4",
                                                   "--compress-add", *J]),
    Command("whatif-fusion-ddp", ["whatif", "--profile", "resnet101", "--workers", "32", "--bandwidth",
                                  "1,10,100Gbps", "--fusion", "ddp", *J]),
    Command("whatif-fusion-none", ["whatif", "--profile", "vgg16", "--workers", "8", "--bandwidth", "10Gbps",
                                   "--fusion", "none", "--compression", "1,2", *J]),
    Command("whatif-cluster", ["whatif", *CL, "--workers", "16,64,256", "--compression", "1,2", *J]),
    Command("whatif-cluster-vgg16-ddp", ["whatif", *CL, "--profile", "vgg16", "--workers", "32",
                                         "--fusion", "ddp", *J]),
    Command("whatif-reproduce", ["whatif", "reproduce", "--out", "whatif", *J]),
    # ---- plan
    Command("plan-small-target", ["plan", "--model", "resnet50", "--gpus", "64,256", "--fabrics", "25gbe,100gbe",
                                  "--bisection", "1,1/4", "--target", "0.9", *J]),
    Command("plan-budget-levels-butterfly", ["plan", "--model", "vgg16", "--gpus", "128", "--gpus-per-node", "4",
                                             "--fabrics", "100g-opa,200g-hdr", "--levels", "2,3", "--bisection",
                                             "1/2", "--algo", "butterfly", "--budget", "300000",
                                             "--hosts-per-leaf", "8", *J]),
    Command("plan-fusion-ddp-roundrobin", ["plan", "--model", "resnet101", "--gpus", "64", "--fabrics", "400g-ndr",
                                           "--bisection", "1", "--fusion", "ddp", "--placement", "round-robin",
                                           "--out", "plan", *J]),
    Command("plan-cluster", ["plan", *CL, "--model", "resnet50,vgg16", "--gpus", "64,256", "--target", "0.95",
                             *J]),
    Command("plan-cluster-budget", ["plan", *CL, "--gpus", "128", "--budget", "2000000", *J]),
    # ---- calibrate nccl-tests on the shipped logs
    Command("calibrate-all5", ["calibrate", "nccl-tests", *LOGS, "--out", "a100.json", *J], files=("a100.json",)),
    Command("calibrate-2-4-check-8", ["calibrate", "nccl-tests", LOGS[1], LOGS[2], "--check", LOGS[3],
                                      "--out", "a.json", *J], files=("a.json",)),
    Command("calibrate-1-8-check-16-holdout", ["calibrate", "nccl-tests", *LOGS[:4], "--check", LOGS[4],
                                               "--hold-out-sizes", "1MB:1GB", "--out", "b.json", *J],
            files=("b.json",)),
    Command("calibrate-fattree-edr-pcie", ["calibrate", "nccl-tests", *LOGS[1:4], "--nic", "EDR",
                                           "--nics-per-server", "4", "--intra", "pcie", "--fabric", "fat-tree",
                                           "--out", "c.json", *J], files=("c.json",)),
    # ---- validate published
    Command("validate-published", ["validate", "published", *J]),
    Command("validate-published-baseline-zhang", ["validate", "published", "--models", "baseline", "--rows",
                                                  "zhang-", "--no-details", *J]),
    Command("validate-published-mechanisms-awan-samsi", ["validate", "published", "--models", "mechanisms",
                                                         "--rows", "awan-,samsi-", *J]),
    # ---- collectives
    Command("collectives-verify-all", ["collectives", "verify", "--algo", "all", "--ranks", "1-16", *J]),
    Command("collectives-verify-some", ["collectives", "verify", "--algo", "ring,chain:chunks=8,hierarchical",
                                        "--ranks", "1-9,16", "--collective", "allreduce,reduce",
                                        "--counts", "0-9", *J]),
    Command("collectives-show-ring-4", ["collectives", "show", "--algo", "ring", "--ranks", "4",
                                        "--format", "json", "--save", "ring4.json"],
            files=("ring4.json",), stdout="json-lines"),
    Command("collectives-show-hierarchical-reduce", ["collectives", "show", "--algo",
                                                     "hierarchical:lower=chain:upper=binomial:group=2",
                                                     "--ranks", "6", "--collective", "reduce", "--root", "1",
                                                     "--count", "24", "--format", "json"], stdout="json-lines"),
    Command("collectives-show-butterfly-far-8", ["collectives", "show", "--algo", "butterfly:order=far",
                                                 "--ranks", "8", "--format", "json"], stdout="json-lines"),
    Command("collectives-show-allgather-recursive", ["collectives", "show", "--algo", "recursive", "--collective",
                                                     "allgather", "--ranks", "8", "--format", "json"],
            stdout="json-lines"),
    Command("collectives-list", ["collectives", "list", "--format", "json"], stdout="json-lines"),
    # ---- models
    Command("models", ["models", *J]),
    Command("models-resnet50", ["models", "resnet50", *J]),
    Command("models-bert-base", ["models", "bert_base", *J]),
    # ---- stencil simulate
    Command("stencil-simulate-small", ["stencil", "simulate", "--ranks", "64,256", *J]),
    Command("stencil-simulate-cartdg", ["stencil", "simulate", "--ranks", "128,512", "--cells", "64",
                                        "--compute-per-cell-s", "1us", "--bytes-per-face-cell", "2560",
                                        "--ranks-per-node", "32", "--rack-size", "4", "--bisection", "1/2",
                                        "--alpha", "1us", "--steps", "3", *J]),
    # ---- bench: only the simulated fields
    Command("bench-sim-ring-2048", ["bench", "sim", "--cases", "ring-2048", *J],
            keep=("case", "algo", "hosts", "simulated_s", "exact", "engine", "target_s",
                  "general_agrees")),
    Command("bench-sim-ring-256-ps-2048", ["bench", "sim", "--cases", "ring-256,ps-2048", *J],
            keep=("case", "algo", "hosts", "simulated_s", "exact", "engine", "target_s",
                  "general_agrees")),
    Command("bench-plan", ["bench", "plan", *J],
            keep=("points", "target_s", "num_topologies", "num_simulations", "grid")),
    Command("bench-whatif", ["bench", "whatif", *J], keep=("points", "replay_total_s", "ours_t_sync_s")),
]
