"""`fabriclab validate nccl-tests` from the command line: the band tables, the record, bad input (the
corpus and the split: tests/bench/test_validate_nccl_corpus.py)."""

import json

from typer.testing import CliRunner

from fabriclab.cli.validate import nccl as validate_nccl


def test_bands_record_and_bad_input(make_group_app, monkeypatch, tmp_path):
    monkeypatch.setenv("FABRICLAB_STORE", "off")
    app, runner = make_group_app(validate_nccl), CliRunner()
    record = tmp_path / "r.json"
    result = runner.invoke(app, ["nccl-tests", "--clusters", "oci-a100-roce", "--models", "both", "--rows",
                                 "--format", "plain", "--json", str(record)])
    assert result.exit_code == 0, result.output
    assert "# 64-512 KB: predicted rows" in result.output and "# 1-16 MB" in result.output
    assert ">= 64 MB:" not in result.output  # one run, its middle sizes held out: no large row predicted
    assert "oci-a100-roce (baseline): predicted rows" in result.output
    assert [line for line in result.output.splitlines() if len(line) > 80 and not line.startswith("record")] == []
    data = json.loads(record.read_text())
    assert data["kind"] == "validate.nccl-tests"
    bands = data["results"]["bands"]
    assert {(b["band"], b["model"]) for b in bands if b["cluster"] == "all"} == {
        ("64-512 KB", "baseline"), ("1-16 MB", "baseline"), ("64-512 KB", "mechanisms"), ("1-16 MB", "mechanisms")}
    rows = data["results"]["clusters"][0]["rows"]
    assert len(rows) == 9 and all(r["servers"] == 2 and r["inside"] in (True, False) for r in rows)
    four = runner.invoke(app, ["nccl-tests", "--clusters", "oci-a100-roce", "--min-servers", "4"])
    assert four.exit_code == 0 and "predicted rows" not in four.output
    for args, words in ((["--models", "some"], "--models"), (["--clusters", "nobody"], "not in"),
                        (["--min-servers", "0"], "--min-servers"), (["--corpus", str(tmp_path)], "no cluster")):
        bad = runner.invoke(app, ["nccl-tests", *args])
        assert bad.exit_code == 2 and words in bad.output, bad.output


def test_a_degraded_cluster_is_marked_and_named_where_it_has_rows(make_group_app, monkeypatch):
    monkeypatch.setenv("FABRICLAB_STORE", "off")
    app, runner = make_group_app(validate_nccl), CliRunner()
    shown = runner.invoke(app, ["nccl-tests", "--clusters", "h100-ndr-node005,oci-a100-roce", "--format", "plain"])
    assert shown.exit_code == 0, shown.output
    assert "h100-ndr-node005 !" in shown.output and "measured degraded" in shown.output
    assert "counting degraded clusters:" in shown.output and "46-48 GB/s" in shown.output
    assert all(len(line) <= 80 for line in shown.output.splitlines() if not line.startswith("record"))
    none = runner.invoke(app, ["nccl-tests", "--clusters", "h100-ndr-node005", "--min-servers", "4"])
    assert none.exit_code == 0 and "measured degraded" not in none.output
