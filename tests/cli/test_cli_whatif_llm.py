"""`fabriclab whatif llm` and `calibrate step` end to end: record, files, errors."""

import json
import subprocess
import sys

ARGS = ["--gpus", "16", "--tp", "2", "--pp", "2", "--gbs", "32", "--seq", "2048"]


def fabriclab(*argv, cwd=None):
    return subprocess.run([sys.executable, "-m", "fabriclab", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**__import__("os").environ, "FABRICLAB_STORE": "off"})


def test_whatif_llm_prints_the_step_and_records_it_with_its_files(tmp_path):
    done = fabriclab("whatif", "llm", *ARGS, "--bandwidth", "200Gbps,800Gbps", "--json", str(tmp_path / "r.json"),
                     "--trace", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    assert "step time" in done.stdout and "tokens/s" in done.stdout and "MFU" in done.stdout
    assert "not measured" in done.stdout  # the preset holds no measured efficiency: said so
    # 80 columns, but for a line that is one long file name
    assert max(len(line) for line in done.stdout.splitlines() if str(tmp_path) not in line) <= 80
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["kind"] == "whatif.llm" and record["step_time_s"] > 0
    assert record["results"]["split_s"]["compute"] > 0 and len(record["results"]["bandwidth_sweep"]) == 2
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_calibrate_step_stores_the_efficiency_that_whatif_then_uses(tmp_path):
    out = tmp_path / "c.json"
    done = fabriclab("calibrate", "step", "--model", "llama3-8b", *ARGS, "--step-time", "3.0s", "--out", str(out))
    assert done.returncode == 0, done.stderr
    cluster = json.loads(out.read_text())
    assert 0 < cluster["compute"]["efficiency"]["bf16"] <= 1
    again = fabriclab("whatif", "llm", "--cluster", str(out), *ARGS, "--json", str(tmp_path / "r.json"))
    assert again.returncode == 0, again.stderr
    assert abs(json.loads((tmp_path / "r.json").read_text())["step_time_s"] - 3.0) < 3.0 * 1e-3
    assert "measured" in again.stdout and "calibrate step" in again.stdout


def test_bad_parallel_options_are_one_line_errors():
    for argv, words in ((["--tp", "3"], "multiple of tp"), (["--gbs", "5"], "--gbs 5"),
                        (["--model", "no-such-model"], "no-such-model"), (["--ep", "3"], "--ep 3"),
                        (["--precision", "fp4"], "--precision")):
        done = fabriclab("whatif", "llm", "--gpus", "16", *argv)
        assert done.returncode != 0
        assert words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
