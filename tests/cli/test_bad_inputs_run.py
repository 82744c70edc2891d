"""Bad input to the "run it" commands (collectives, train, profile, data, stencil), as a user types it.

Each case runs `python -m fabriclab ...` as a whole process and must end within `LIMIT_S` with exit code
2, stdout empty, and exactly one line on stderr that starts with `error:` (no traceback, no usage box):
every input is checked before torch is imported or a rank starts, so none of these may hang, fill the
memory or the disk, or measure something other than what was asked. The cases run a few at a time in
one fixture, so the whole table takes a fraction of a minute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

LIMIT_S = 30.0
WORKERS = 3

# (id, argv after `fabriclab`, a fragment of the error line). `{tmp}` is a folder holding the files below;
# leading `NAME=VALUE` items are set in the command's environment.
CASES = [
    # usage errors from the parser: one line through typer's public classes (a private import of typer's
    # copy of click crashed every command on typer 0.27.2)
    ("np-not-a-number", ["train", "--np", "abc"], "Invalid value for '--np'"),
    ("unknown-option", ["train", "--gpus-per-rank", "2"], "No such option"),  # wording differs by typer
    # collectives show / verify / list
    ("show-load-array", ["collectives", "show", "--load", "{tmp}/array.json"], "holds an array"),
    ("show-load-null", ["collectives", "show", "--load", "{tmp}/null.json"], "holds null"),
    ("show-load-binary", ["collectives", "show", "--load", "{tmp}/junk.bin"], "junk.bin"),
    ("show-load-malformed", ["collectives", "show", "--load", "{tmp}/short-op.json"], "not a fabriclab schedule"),
    ("show-save-dir", ["collectives", "show", "--algo", "ring", "--ranks", "4", "--save", "{tmp}"],
     "that is a directory"),
    ("show-huge-chunks", ["collectives", "show", "--algo", "chain:chunks=100000000", "--ranks", "4"],
     "more than the 4096 pipeline chunks"),
    ("show-huge-ranks", ["collectives", "show", "--algo", "ring", "--ranks", "1000000"], "limit of 1024"),
    ("show-negative-count", ["collectives", "show", "--algo", "ring", "--ranks", "4", "--count", "-1"],
     "--count -1"),
    ("verify-million-ranks", ["collectives", "verify", "--ranks", "1000000"], "limit of 1024"),
    ("verify-huge-range", ["collectives", "verify", "--ranks", "1-1000000000000"], "limit of 1024"),
    ("verify-long-sweep", ["collectives", "verify", "--ranks", "1-1024"], "min of verification"),
    ("verify-huge-counts", ["collectives", "verify", "--counts", "0-100000000000000000000"], "limit of"),
    ("verify-json-proc", ["collectives", "verify", "--json", "/proc/x.json"], "not a regular file location"),
    ("list-format", ["collectives", "list", "--format", "yaml"], "use one of table, plain"),
    # collectives bench: all checked before a rank starts
    ("bench-np-huge", ["collectives", "bench", "--np", "100000"], "local ranks on this machine"),
    ("bench-partial-element", ["collectives", "bench", "--dtype", "int32", "--sizes", "6B"],
     "not a whole number of int32 elements"),
    ("bench-sweep-partial", ["collectives", "bench", "--dtype", "int64", "--sizes", "4B:1KB"],
     "size 4B is not a whole number of int64"),
    ("bench-memory", ["collectives", "bench", "--sizes", "64GB"], "of memory, more than the"),
    ("bench-timeout-nan", ["collectives", "bench", "--timeout", "nan"], "--timeout nan"),
    ("bench-timeout-negative", ["collectives", "bench", "--timeout", "-5"], "--timeout -5"),
    ("bench-segment", ["collectives", "bench", "--segment", "1B"], "below one float32 element"),
    ("bench-json-proc", ["collectives", "bench", "--json", "/proc/x.json"], "not a regular file location"),
    ("bench-iters", ["collectives", "bench", "--iters", "0"], "iters >= 1"),
    ("bench-root", ["collectives", "bench", "--op", "broadcast", "--root", "7"], "root 7 is out of range"),
    # train
    ("train-negative-steps", ["train", "--steps", "-1"], "need 1 <= steps"),
    ("train-batch-split", ["train", "--batch-size", "6", "--np", "4"], "does not split over 4 ranks"),
    ("train-unknown-model", ["train", "--model", "lenet"], "unknown model 'lenet'"),
    ("train-lr-nan", ["train", "--lr", "nan"], "--lr nan"),
    ("train-momentum", ["train", "--momentum", "1.5"], "momentum in [0, 1)"),
    ("train-dilation-inf", ["train", "--replay", "resnet50", "--dilation", "inf"], "--dilation inf"),
    ("train-np-huge", ["train", "--np", "100000"], "local ranks on this machine"),
    ("train-memory", ["train", "--batch-size", "40000"], "of memory, more than the"),
    ("train-trace-proc", ["train", "--trace", "/proc/t.json"], "not a regular file location"),
    ("train-trace-dir", ["train", "--trace", "{tmp}"], "that is a directory"),
    ("train-replay-nan", ["train", "--replay", "{tmp}/nan-profile.json"], "nan-profile.json:5: NaN"),
    ("train-no-data", ["train", "--data", "{tmp}/no-such-folder"], "does not exist"),
    ("train-fusion", ["train", "--fusion", "fifo"], "unknown fusion 'fifo'"),
    ("train-comm-threads", ["train", "--comm-threads", "0"], "--comm-threads 0"),
    ("train-sync", ["train", "--sync", "sharded:native"], "sharded needs a reduce-scatter"),
    # the transformer trainer (issue 38): the job's one check (workload/job.py), then what this host holds
    ("train-llm-ep-dense", ["train", "--model", "gpt-tiny", "--np", "2", "--ep", "2"], "--ep 2 needs an MoE model"),
    ("train-llm-ep-experts", ["train", "--model", "moe-tiny", "--np", "6", "--ep", "3"],
     "its 8 experts do not split over --ep 3"),
    ("train-llm-heads", ["train", "--model", "gpt-tiny", "--np", "3", "--tp", "3"],
     "4 attention heads and 4 key/value heads must split over --tp 3"),
    ("train-llm-np-huge", ["train", "--model", "gpt-tiny", "--np", "100000"], "local ranks on this machine"),
    # 64 ranks of 2.7e9 parameters in float64: ~110 GB each, more than any one machine holds
    ("train-llm-host-memory", ["train", "--model", "gpt3-175b", "--np", "64", "--tp", "8", "--pp", "8", "--dtype",
                               "float64"], "of memory, more than the"),
    ("train-llm-gbs-huge", ["train", "--model", "gpt-tiny", "--np", "2", "--gbs", "8000000000"],
     "a step here takes at most 262,144"),
    # profile
    ("profile-no-model", ["profile"], "give --model NAME"),
    ("profile-batch", ["profile", "--model", "alexnet", "--batch-size", "0"], "batch size must be >= 1"),
    ("profile-device", ["profile", "--model", "alexnet", "--device", "tpu"], "use cpu, cuda or cuda:N"),
    ("profile-memory", ["profile", "--model", "resnet50", "--batch-size", "100000"], "of memory, more than"),
    ("profile-out-dir", ["profile", "--model", "alexnet", "--out", "{tmp}"], "that is a directory"),
    ("add-cost-memory", ["profile", "add-cost", "--max-size", "64GB"], "of memory, more than"),
    ("add-cost-small", ["profile", "add-cost", "--max-size", "10B"], "below the smallest size"),
    # data make
    ("data-out-file", ["data", "make", "--out", "{tmp}/array.json"], "that is a file"),
    ("data-shards", ["data", "make", "--out", "{tmp}/d", "--shards", "0"], "--shards 0"),
    ("data-disk", ["data", "make", "--out", "{tmp}/d", "--images", "100000000000"], "GB free"),
    ("data-image-size", ["data", "make", "--out", "{tmp}/d", "--image-size", "5000"], "--image-size 5000"),
    ("data-classes", ["data", "make", "--out", "{tmp}/d", "--classes", "0"], "--classes 0"),
    # stencil
    ("stencil-np-huge", ["stencil", "run", "--np", "1000"], "local ranks on this machine"),
    ("stencil-cells-memory", ["stencil", "run", "--cells", "100000"], "of memory, more than"),
    ("stencil-no-split", ["stencil", "run", "--np", "3", "--cells", "16"], "3 ranks cannot split 16x16x16"),
    ("stencil-timeout-nan", ["stencil", "run", "--timeout", "nan"], "--timeout nan"),
    ("stencil-sim-ranks", ["stencil", "simulate", "--ranks", "100000000"], "limit of 262144"),
    ("stencil-sim-no-split", ["stencil", "simulate", "--ranks", "262143", "--cells", "128"], "e.g. 262144"),
    ("stencil-sim-out-file", ["stencil", "simulate", "--out", "{tmp}/array.json"], "that is a file"),
    ("stencil-sim-inf", ["stencil", "simulate", "--compute-per-cell-s", "1e999s"], "give a finite number"),
    ("stencil-scale-np", ["stencil", "scale", "--np", "1-100000"], "limit of 65536"),
    # emu: the state file names the one cluster `down` removes, so it is checked before anything is removed
    # (these fail the same way without root: the file is checked first)
    ("emu-down-state-dir", ["FABRICLAB_EMU_STATE={tmp}", "emu", "down"], "state file ($FABRICLAB_EMU_STATE)"),
    ("emu-down-state-proc", ["FABRICLAB_EMU_STATE=/proc/x/emu.json", "emu", "down", "--all"],
     "not a regular file location"),
    ("emu-up-state-dir", ["FABRICLAB_EMU_STATE={tmp}", "emu", "up", "--topology", "star", "--hosts", "2"],
     "that is a directory"),
    ("emu-down-unknown-option", ["emu", "down", "--everything"], "--everything"),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess | None, float]]:
    tmp = tmp_path_factory.mktemp("bad-inputs")
    (tmp / "array.json").write_text("[]")
    (tmp / "null.json").write_text("null")
    (tmp / "junk.bin").write_bytes(bytes(range(256)) * 4)
    (tmp / "short-op.json").write_text(json.dumps({"schema": 1, "collective": "allreduce", "algorithm": "x",
                                                   "num_ranks": 1, "count": 1, "chunks": [[0, 1]],
                                                   "steps": [[[["send", 0]]]]}))
    (tmp / "nan-profile.json").write_text('{\n "model": "m",\n "device": "cpu",\n "batch_size": 2,\n'
                                          ' "iteration_s": NaN,\n "grads": []\n}\n')
    env = {**os.environ, "FABRICLAB_STORE": "off", "COLUMNS": "80"}

    def run(case):
        name, argv, _ = case
        argv = [a.replace("{tmp}", str(tmp)) for a in argv]
        settings = {}
        while argv and re.match(r"[A-Z_]+=", argv[0]):
            key, value = argv.pop(0).split("=", 1)
            settings[key] = value
        start = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "fabriclab", *argv], capture_output=True, text=True,
                                  timeout=LIMIT_S, env={**env, **settings}, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            done = None
        return name, (done, time.monotonic() - start)

    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(pool.map(run, CASES))


def test_the_table_is_large_and_its_names_are_distinct():
    assert len(CASES) >= 35
    assert len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_error_line_exit_2_in_time(outcomes, name, argv, fragment):
    done, elapsed = outcomes[name]
    assert done is not None and elapsed < LIMIT_S, f"fabriclab {' '.join(argv)} ran past {LIMIT_S} s"
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert fragment in lines[0], lines[0]
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
