"""`fabriclab calibrate nccl-tests` on a log of examples/nccl-corpus: read with the corpus.json beside it (its
rank list rebuilt, the servers it names where no option gives them), as `validate nccl-tests` reads it; a log
kept without its rank list and without its manifest says where the manifest goes."""

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.fabric.cluster import load_cluster

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "nccl-corpus" / "h100-ndr-8node"
ENV = {"COLUMNS": "80", "FABRICLAB_STORE": "off"}


def test_a_corpus_log_is_calibrated_with_its_manifest(tmp_path):
    out, record = tmp_path / "h100.json", tmp_path / "r.json"
    result = CliRunner().invoke(app, ["calibrate", "nccl-tests", str(CORPUS / "allreduce_16.log"), "--check",
                                      str(CORPUS / "allreduce_32.log"), "--out", str(out), "--json", str(record)],
                                env=ENV)
    assert result.exit_code == 0, result.output
    assert f"read with {CORPUS / 'corpus.json'}" in " ".join(result.stdout.split())
    config = json.loads(record.read_text())["config"]
    assert config["nic"] == "NDR" and config["corpus"] == str(CORPUS)
    cluster = load_cluster(out)
    assert cluster.server.gpus_per_server == 8 and cluster.server.nics_per_server == 8
    assert cluster.server.nic_bandwidth_Bps == 50e9  # NDR, 400 Gb/s, as the manifest says (the default is HDR)
    assert cluster.library.nccl_version == "2.26.2"  # the manifest's model_nccl_version


def test_an_option_overrides_the_manifest(tmp_path):
    result = CliRunner().invoke(app, ["calibrate", "nccl-tests", str(CORPUS / "allreduce_16.log"), "--out",
                                      str(tmp_path / "c.json"), "--nccl-version", "2.21.5"], env=ENV)
    assert result.exit_code == 0, result.output
    assert load_cluster(tmp_path / "c.json").library.nccl_version == "2.21.5"


def test_a_corpus_log_without_its_manifest_says_where_the_manifest_goes(tmp_path):
    shutil.copy(CORPUS / "allreduce_16.log", tmp_path / "allreduce_16.log")
    result = CliRunner().invoke(app, ["calibrate", "nccl-tests", str(tmp_path / "allreduce_16.log"), "--out",
                                      str(tmp_path / "c.json")], env=ENV)
    assert result.exit_code == 2
    assert "is read with the corpus.json that names it" in " ".join(result.stderr.split())
