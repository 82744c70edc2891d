"""Bad input found by the probes of issue 49: one `error:` line naming the file or field and what to change,
exit code 2, no traceback, nothing written; options given but ignored are one `warning:` line each, once;
and a peer simulator's binary (ASTRA-sim, SimAI) leaves no process and no temporary folder behind however
its run ends (the time limit, SIGTERM, Ctrl-C, a crash).

Each case runs `python -m fabriclab` as a whole process (the bad-input cases a few at a time, in an empty
folder each: `outcomes`). `{tmp}` in an argument is the module's folder of inputs (`files`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fabriclab.fabric.kernel_fit import shipped_table
from fabriclab.record import make_record

TIME_LIMIT_S = 120
WORKERS = 3  # bad-input cases at a time
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "examples" / "nccl-corpus"
A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
LATIN1 = "gpu,op,dtype,M,N,K,seconds\nNVIDIA H200,gemm,bf16,1,2,3,0.1,caf\xe9\n".encode("latin-1")

# (arguments, fragment of the error line); every one exits 2 with that one line
CASES = [
    # tracebacks before
    (("cluster", "export", "dgx-h100", "--out", "{tmp}/NODIR/c.json"),
     "--out {tmp}/NODIR/c.json: the folder {tmp}/NODIR does not exist; create it first"),
    (("calibrate", "kernels", "--out", "{tmp}/NODIR/c.json"), "the folder {tmp}/NODIR does not exist"),
    (("results", "show", "99999999999999999999", "--store", "{tmp}/store.db"),
     "no record 99999999999999999999 in {tmp}/store.db"),
    # calibrate kernels: the table's GPU, rows faster than the GPU, absurd times, sizes, too few rows
    (("calibrate", "kernels", "--table", "{tmp}/a100.csv"),
     f"a100.csv was measured on {A100} (ampere), the cluster's GPU is H100-SXM5-80GB (hopper)"),
    (("calibrate", "kernels", "--table", "{tmp}/fast.csv"),
     "fast.csv, line 2: gemm 16384x16384x4096 in 1e-05 s runs at 219,902 TFLOP/s, above the H200-SXM-141GB's "
     "bf16 peak of 989 TFLOP/s"),
    (("calibrate", "kernels", "--table", "{tmp}/tiny.csv"), "tiny.csv, line 2: seconds 1e-30: a kernel takes"),
    (("calibrate", "kernels", "--table", "{tmp}/m0.csv"), "m0.csv, line 452: M 0: a sdpa_causal_fwd row's M, N"),
    (("calibrate", "kernels", "--table", "{tmp}/one-attention.csv"),
     "1 sdpa_causal_fwd row(s) of >= 1e+11 FLOPs: the attention forward share is fitted from at least 3"),
    # the corpus: a manifest naming another GPU than its cluster file, or than its logs
    (("validate", "nccl-tests", "--corpus", "{tmp}/corpus", "--clusters", "h100-ndr-8node"),
     f"h100-ndr-8node/corpus.json: hardware.gpu '{A100}', but cluster.json beside it models '{H100}'"),
    (("validate", "nccl-tests", "--corpus", "{tmp}/corpus", "--clusters", "h100-400g-10node"),
     f"the log ran on '{H100}', corpus.json says hardware.gpu '{A100}': correct the manifest"),
    # files that are not UTF-8 text: named, through the one reader (fabriclab/textfile.py)
    (("calibrate", "kernels", "--table", "{tmp}/latin1.csv"),
     "kernel table {tmp}/latin1.csv is not UTF-8 text (byte 0xe9 at line 2)"),
    (("whatif", "--profile", "{tmp}/latin1.bk.log", "--iteration-time", "0.1"),
     "{tmp}/latin1.bk.log is not UTF-8 text"),
    (("simulate", "collective", "--cluster", "{tmp}/latin1.json"), "cluster file {tmp}/latin1.json is not UTF-8"),
    (("calibrate", "nccl-tests", "{tmp}/latin1.log", "--out", "{tmp}/c.json"), "log {tmp}/latin1.log is not UTF-8"),
    (("whatif", "llm", "--model", "{tmp}/latin1.json"), "{tmp}/latin1.json is not UTF-8 text"),
    # unclear before
    (("results", "list", "--store", "{tmp}/bad-schema.db"),
     "bad-schema.db: its meta table's schema_version is 'three', not a schema number"),
    (("plan", "--model", "{tmp}/emptydir", "--gpus", "8", "--clusters", "dgx-h100"),
     "--model {tmp}/emptydir: the folder has no config.json"),
    (("whatif", "llm", "--model", "{tmp}/emptydir"), "emptydir: the folder has no config.json"),
    (("whatif", "llm", "--chakra", ""), "--chakra '': give a file prefix such as traces/step"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("bad-inputs-more")
    shipped = shipped_table().read_text()
    header, *rows = shipped.splitlines()
    (tmp / "a100.csv").write_text(shipped.replace("NVIDIA H200", A100))
    (tmp / "fast.csv").write_text("\n".join([header, "NVIDIA H200,gemm,bf16,16384,16384,4096,0.00001,,", *rows]))
    (tmp / "tiny.csv").write_text("gpu,op,dtype,M,N,K,seconds\nNVIDIA H200,copy,bf16,1048576,0,0,1e-30\n")
    (tmp / "m0.csv").write_text(shipped + "NVIDIA H200,sdpa_causal_fwd,bf16,0,32,4096,0.001,,\n")
    gemms = [r for r in rows if ",sdpa_" not in r]
    (tmp / "one-attention.csv").write_text("\n".join([header, *gemms, "NVIDIA H200,sdpa_causal_fwd,bf16,8,32,8192,"
                                                                      "0.01,,"]) + "\n")
    for name in ("latin1.csv", "latin1.bk.log", "latin1.json", "latin1.log"):
        (tmp / name).write_bytes(LATIN1)
    (tmp / "emptydir").mkdir()
    _stores(tmp)
    _corpus(tmp / "corpus")
    return tmp


def _stores(tmp: Path) -> None:
    from fabriclab.report.store import add_record

    add_record(make_record("whatif", {}, []), tmp / "store.db")
    add_record(make_record("whatif", {}, []), tmp / "bad-schema.db")
    with sqlite3.connect(tmp / "bad-schema.db") as conn:
        conn.execute("UPDATE meta SET value = 'three' WHERE key = 'schema_version'")


def _corpus(root: Path) -> None:
    """Two clusters whose manifest names an A100: one with H100 logs of no GPU line and its H100 cluster.json,
    one whose logs name their H100 (its cluster.json says A100 too)."""
    for name in ("h100-ndr-8node", "h100-400g-10node"):
        shutil.copytree(CORPUS / name, root / name)
        manifest = root / name / "corpus.json"
        manifest.write_text(manifest.read_text().replace(f'"gpu": "{H100}"', f'"gpu": "{A100}"'))
    cluster = root / "h100-400g-10node" / "cluster.json"
    cluster.write_text(cluster.read_text().replace(H100, A100))


def run_cli(args, cwd: Path, env: dict | None = None, timeout: float = TIME_LIMIT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fabriclab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, "FABRICLAB_STORE": "off", "COLUMNS": "100", **(env or {})})


@pytest.fixture(scope="module")
def outcomes(files, tmp_path_factory) -> dict[tuple[str, ...], tuple[subprocess.CompletedProcess | None, Path]]:
    """Every bad-input case's process (None: it ran past TIME_LIMIT_S) and the empty folder it ran in,
    WORKERS at a time."""
    cases = {args: tmp_path_factory.mktemp("case") for args, _ in CASES}

    def run(args):
        try:
            return args, (run_cli([a.replace("{tmp}", str(files)) for a in args], cwd=cases[args]), cases[args])
        except subprocess.TimeoutExpired:
            return args, (None, cases[args])

    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(pool.map(run, cases))


@pytest.mark.parametrize("args, fragment", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_error_line(files, outcomes, args, fragment):
    done, cwd = outcomes[args]
    assert done is not None, f"fabriclab {' '.join(args)} ran past {TIME_LIMIT_S} s"
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout[-1000:], done.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert fragment.replace("{tmp}", str(files)) in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    assert list(cwd.iterdir()) == [], "nothing is written where it runs (--chakra '' wrote .0.et, ...)"
    assert not (files / "NODIR").exists() and not (files / "c.json").exists()


def test_the_default_kernel_fit_runs_on_the_tables_gpu(files, tmp_path):
    """The shipped table is an H200's: fitted against the H200's peak and rates, carried to dgx-h100's H100."""
    done = run_cli(["calibrate", "kernels", "--json", str(tmp_path / "r.json")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "fitted on the table's GPU, H200-SXM-141GB" in " ".join(done.stdout.split())
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert results["table_gpu"] == "H200-SXM-141GB" and results["gpu"] == "H100-SXM5-80GB"


# ---- options given but ignored: one warning line each, once ------------------------------------------

LLM = ("whatif", "llm", "--gpus", "16", "--gbs", "32", "--seq", "2048")
IGNORED = [
    ((*LLM, "--fsdp-unit", "4", "--trace-stage", "0", "--qps", "2", "--seeds", "3", "--ep-overlap"),
     ["--fsdp-unit is ignored with --zero 1", "--ep-overlap is ignored with --ep 1",
      "--qps is ignored with routing ideal", "--seeds is ignored with routing ideal and placement packed",
      "--trace-stage is ignored without --trace"]),
    ((*LLM, "--tp", "1", "--tp-overlap", "--efficiency", "0.5", "--calibrated", "{cal}"),
     ["--tp-overlap is ignored with --tp 1", "--calibrated is ignored with --efficiency"]),
    (("calibrate", "step", "--gpus", "16", "--gbs", "32", "--seq", "2048", "--step-time", "1s", "--out",
      "{tmp}/s.json", "--fsdp-unit", "2", "--tp", "1", "--tp-overlap"),
     ["--tp-overlap is ignored with --tp 1", "--fsdp-unit is ignored with --zero 1"]),
    (("simulate", "collective", "--cluster", "dgx-h100", "--gpus", "16", "--sizes", "64MB", "--link", "1Gbps",
      "--algo", "butterfly", "--ops-csv", "{tmp}/ops.csv", "--seed", "3", "--seeds", "4", "--qps", "2",
      "--topology", "torus", "--size", "1MB", "--gamma", "1e-9"),
     ["--algo is ignored with --cluster", "--topology is ignored with --cluster", "--link is ignored with --cluster",
      "--size is ignored with --cluster", "--gamma is ignored with --cluster", "--ops-csv is ignored with --cluster",
      "--seed is ignored with routing ideal", "--qps is ignored with routing ideal",
      "--seeds is ignored with routing ideal"]),
    (("plan", "--model", "llama3-8b", "--gpus", "16", "--clusters", "dgx-h100", "--max-configs", "2", "--seeds", "3",
      "--efficiency", "0.5", "--calibrated", "{cal}"),
     ["--seeds is ignored with routing ideal", "--calibrated is ignored with --efficiency"]),
]


@pytest.fixture(scope="module")
def calibrated(files) -> Path:
    """A cluster file with a `calibrate step` scale (what --calibrated reads)."""
    path = files / "cal.json"
    done = run_cli(["calibrate", "step", "--gpus", "16", "--gbs", "32", "--seq", "2048", "--step-time", "1s",
                    "--out", str(path)], cwd=files)
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.parametrize("args, warnings", IGNORED, ids=[" ".join(c[0][:3]) for c in IGNORED])
def test_an_ignored_option_is_one_warning_line_once(files, calibrated, tmp_path, args, warnings):
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{cal}", str(calibrated)) for a in args]
    done = run_cli(argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(lines) == len(warnings), lines
    for words in warnings:
        assert sum(line.startswith(f"warning: {words}") for line in lines) == 1, (words, lines)
    assert not (tmp_path / "ops.csv").exists()


def test_an_option_that_counts_is_not_warned_about(files, tmp_path):
    done = run_cli([*LLM, "--zero", "3", "--fsdp-unit", "2", "--routing", "ecmp", "--qps", "2", "--seeds", "2"],
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warning: " not in done.stderr, done.stderr


# ---- peer simulators: nothing left running, no temporary folder left -------------------------------

# A binary that starts a sleeping child, notes both pids, then hangs (or exits with a status).
FAKE = """#!/bin/sh
sleep 300 &
echo $! >> "$FAKE_PIDS"
echo $$ >> "$FAKE_PIDS"
{end}
"""


def _fake(folder: Path, name: str, end: str = "sleep 300") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FAKE.format(end=end))
    path.chmod(0o755)
    return path


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, dead and not yet reaped, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _pids(path: Path, at_least: int = 0, wait_s: float = 0.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    while True:
        pids = [int(x) for x in path.read_text().split()] if path.exists() else []
        if len(pids) >= at_least or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def _settle(pids: list[int]) -> list[int]:
    """The pids still running after a moment (SIGKILL is delivered at once; give the kernel a beat)."""
    deadline = time.monotonic() + 5
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if _running(p)]


@pytest.fixture
def sandbox(tmp_path):
    """A TMPDIR of its own (where the temporary folders would be left) and the fake's pid file; afterwards
    every pid it noted is killed, passed or failed."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    pids = tmp_path / "pids"
    yield {"TMPDIR": str(temp), "FAKE_PIDS": str(pids)}, temp, pids
    for pid in _pids(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


ASTRA = ("bench", "astra-sim", "--no-collectives", "--gbs", "8", "--seq", "1024")


@pytest.mark.parametrize("end, code, fragment", [
    ("sleep 300", 1, "ran past 2 s on 16 ranks and was stopped, with all it started; --out DIR keeps the traces"),
    ("exit 3", 1, "ASTRA-sim exited with 3 (--out DIR keeps the traces)"),
])
def test_astra_sim_leaves_no_process_and_no_folder(sandbox, tmp_path, end, code, fragment):
    env, temp, pid_file = sandbox
    fake = _fake(tmp_path / "astra", "AstraSim_Analytical_Congestion_Unaware", end)
    done = run_cli([*ASTRA, "--astra-sim", str(fake), "--timeout", "2s"], cwd=tmp_path, env=env)
    assert done.returncode == code and fragment in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    pids = _pids(pid_file)
    assert len(pids) == 2 and _settle(pids) == [], "the binary's child outlived the run"
    assert list(temp.iterdir()) == [], "the temporary folder of the traces was left"


@pytest.mark.parametrize("signum, code, line", [(signal.SIGTERM, 130, "error: terminated (SIGTERM)"),
                                                (signal.SIGINT, 130, "error: interrupted")])
def test_astra_sim_stopped_by_a_signal_leaves_nothing(sandbox, tmp_path, signum, code, line):
    env, temp, pid_file = sandbox
    fake = _fake(tmp_path / "astra", "AstraSim_Analytical_Congestion_Unaware")
    proc = subprocess.Popen([sys.executable, "-m", "fabriclab", *ASTRA, "--astra-sim", str(fake), "--timeout",
                             "60s"], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "FABRICLAB_STORE": "off", **env},
                            # a pytest-xdist worker ignores SIGINT, and a child keeps an ignored SIGINT (Python
                            # then installs no KeyboardInterrupt): give the command Ctrl-C as a shell would
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        pids = _pids(pid_file, at_least=2, wait_s=60)
        assert len(pids) == 2, "the fake binary did not start"
        assert list(temp.iterdir()), "the run's temporary folder is there while it runs"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code and err.strip().splitlines() == [line], err[-2000:]
    assert _settle(pids) == [], "the binary or its child outlived the interrupted run"
    assert list(temp.iterdir()) == []


def test_simai_leaves_no_process_and_no_folder(sandbox, tmp_path):
    env, temp, pid_file = sandbox
    simai = tmp_path / "simai"
    for name in ("simai-simulator", "simai-analytical"):
        _fake(simai / "bin", name)
    (simai / "inputs").mkdir()
    (simai / "inputs" / "SimAI.conf").write_text("")
    done = run_cli(["bench", "simai", "--simai", str(simai), "--timeout", "1s", "--repeats", "1"], cwd=tmp_path,
                   env=env)
    assert "ran past the 1 s limit" in done.stdout + done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    pids = _pids(pid_file)
    assert len(pids) == 4 and _settle(pids) == [], "a SimAI binary's child outlived its run"
    assert list(temp.iterdir()) == []


def test_a_simai_binary_that_exits_leaves_no_child(tmp_path):
    from fabriclab.bench.simai.runner import run_process

    pid_file = tmp_path / "pids"
    proc = run_process(["sh", "-c", f"sleep 300 & echo $! > {pid_file}; exit 0"], cwd=tmp_path,
                       env=dict(os.environ), timeout_s=30)
    assert proc.returncode == 0 and proc.wall_s < 10
    assert _settle(_pids(pid_file)) == []
