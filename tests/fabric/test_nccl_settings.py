"""NCCL's own variables (NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE) and a tuner plugin's rules decide what the
model's NCCL may run (fabric/nccl_env.py, fabric/nccl_tuner.py, nccl/choice.py)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fabriclab.fabric.cluster import dumps, from_dict, load_cluster
from fabriclab.fabric.nccl_env import allowed_algorithms, allowed_protocols, parse_assignments, permitted
from fabriclab.fabric.nccl_tuner import TunerRule, per_rank_bytes, read_textproto, tuner_rule
from fabriclab.nccl.choice import nccl_choices
from fabriclab.nccl.predict import collective_times

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "nccl-corpus"

TEXTPROTO = """
# proto-file: config_proto/tuner_config.proto
communicator_configs {
  node_range: { min: 2 max: 3 }   # exclusive
  rank_per_node_range: { min: 1 max: 2 }
  coll_configs {
    coll_type: COLL_ALL_REDUCE
    msg_size_tuning_rules {
      per_rank_message_size: { min: 0 max: 65536 }
      coll_tuning_spec: { algorithm: ALGO_TREE protocol: PROTO_LL num_channel: 2 }
    }
    msg_size_tuning_rules {
      per_rank_message_size: { min: 65536 }
      coll_tuning_spec: { algorithm: ALGO_RING protocol: PROTO_SIMPLE num_channel: 4 }
    }
  }
  coll_configs {
    coll_type: COLL_DEFAULT
    msg_size_tuning_rules {
      per_rank_message_size: { min: 0 }
      coll_tuning_spec: { algorithm: ALGO_NVLS_TREE protocol: PROTO_LL128 }
    }
  }
}
"""


def test_nccl_algo_and_proto_read_as_nccl_reads_them():
    assert allowed_algorithms({"NCCL_ALGO": "Ring,tree"}, "allreduce") == {"ring", "tree"}
    assert allowed_algorithms({"NCCL_ALGO": "^NVLS,NVLSTree"}, "allreduce") == {
        "ring", "tree", "collnet_direct", "collnet_chain", "pat"}
    per = {"NCCL_ALGO": "allreduce:tree;allgather:ring"}
    assert allowed_algorithms(per, "allreduce") == {"tree"} and allowed_algorithms(per, "allgather") == {"ring"}
    assert "nvls" in allowed_algorithms(per, "broadcast")  # a collective not named keeps every algorithm
    assert "nvls_tree" not in allowed_algorithms({"NCCL_NVLS_ENABLE": "0"}, "allreduce")
    assert allowed_protocols({"NCCL_PROTO": "^LL"}) == {"LL128", "Simple"}
    # 2.24's parts: a first list for every collective, then per collective (NCCL_PROTO too)
    base = {"NCCL_ALGO": "Ring,Tree;allreduce:tree", "NCCL_PROTO": "LL,Simple;allreduce:^LL"}
    assert allowed_algorithms(base, "allreduce") == {"tree"} and allowed_algorithms(base, "allgather") == {"ring",
                                                                                                         "tree"}
    assert allowed_protocols(base, "allreduce") == {"LL128", "Simple"} and allowed_protocols(base, "allgather") == {
        "LL", "Simple"}
    assert permitted({}, "allreduce", "nvls", "Simple") and not permitted({"NCCL_PROTO": "Simple"}, "allreduce",
                                                                        "ring", "LL")


def test_bad_variables_say_what_to_give():
    with pytest.raises(ValueError, match="'Bus' is not one of Ring, Tree"):
        parse_assignments(["NCCL_ALGO=Ring,Bus"])
    with pytest.raises(ValueError, match="reads only NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, NCCL_BUFFSIZE"):
        parse_assignments(["NCCL_MIN_NCHANNELS=4"])
    with pytest.raises(ValueError, match="NCCL_BUFFSIZE='8M': give bytes as a whole number"):
        parse_assignments(["NCCL_BUFFSIZE=8M"])
    assert parse_assignments(["NCCL_BUFFSIZE=8388608"]) == {"NCCL_BUFFSIZE": "8388608"}
    with pytest.raises(ValueError, match="VARIABLE=VALUE"):
        parse_assignments(["NCCL_PROTO"])
    with pytest.raises(ValueError, match="COLLECTIVE:LIST"):
        parse_assignments(["NCCL_ALGO=alltoall:ring"])
    with pytest.raises(ValueError, match="NCCL_ALGO='allreduce:': give a comma list"):
        parse_assignments(["NCCL_ALGO=allreduce:"])
    with pytest.raises(ValueError, match="'ring' has no collective; only the first part"):
        parse_assignments(["NCCL_ALGO=allreduce:tree;ring"])


def test_the_variables_restrict_the_choice_and_refuse_an_empty_one():
    h100 = load_cluster(CORPUS / "h100-ndr-8node" / "cluster.json")  # NCCL 2.26.2, 8 x H100 and NDR
    sizes = [1 << 10, 1 << 20, 64 << 20]
    free = nccl_choices(h100, 32, sizes, "allreduce")
    assert {a for a, _ in free} - {"ring", "tree"}  # NVLS-tree somewhere without the variables
    tcpxo = replace(h100, library=replace(h100.library, nccl_env={"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple",
                                                                  "NCCL_NVLS_ENABLE": "0"}))
    assert {c for c in nccl_choices(tcpxo, 32, sizes, "allreduce")} <= {("ring", "Simple"), ("tree", "Simple")}
    times, picks = collective_times(tcpxo, 32, sizes, "allreduce")
    assert all(p.endswith("/Simple") for p in picks) and (times > 0).all()
    none = replace(h100, library=replace(h100.library, nccl_env={"NCCL_ALGO": "Tree"}))
    with pytest.raises(ValueError, match="NCCL_ALGO=Tree leaves no algorithm .* allgather"):
        nccl_choices(none, 32, sizes, "allgather")
    # the file keeps them, and a cluster without them writes no key
    assert from_dict(json.loads(dumps(tcpxo))).library.nccl_env == tcpxo.library.nccl_env
    assert "nccl_env" not in dumps(h100) and "tuner" not in dumps(h100)
    bad = json.loads(dumps(tcpxo))
    bad["library"]["nccl_env"]["NCCL_MIN_NCHANNELS"] = "4"
    with pytest.raises(ValueError, match="library.nccl_env has NCCL_MIN_NCHANNELS"):
        from_dict(bad, "x.json")


def test_a_tuner_config_reads_into_rules_and_overrides_the_choice():
    rules = read_textproto(TEXTPROTO)
    assert len(rules) == 3 and rules[0] == TunerRule(nodes=(2, 3), ranks_per_node=(1, 2), collective="allreduce",
                                                     per_rank_bytes=(0, 65536), algorithm="tree", protocol="LL",
                                                     channels=2)
    assert rules[2].algorithm == "nvls_tree" and rules[2].channels == 0
    assert tuner_rule(rules, 2, 1, "allreduce", 1 << 20).algorithm == "ring"
    assert tuner_rule(rules, 2, 1, "allgather", 1).collective == "default"  # the default rules
    assert tuner_rule(rules, 4, 1, "allreduce", 1) is None and tuner_rule(rules, 2, 8, "allreduce", 1) is None
    assert per_rank_bytes(1 << 20, 4) == 1 << 18  # the call's bytes over its ranks, for every collective
    one = replace(load_cluster(CORPUS / "h100-ndr-8node" / "cluster.json"), name="one")
    one = replace(one, server=replace(one.server, gpus_per_server=1, nics_per_server=1))
    sizes = [4 << 10, 4 << 20]
    tuned = replace(one, library=replace(one.library, tuner=rules))
    assert nccl_choices(tuned, 2, sizes, "allreduce") == [("tree", "LL"), ("ring", "Simple")]
    # the rule's channel count is what the pair runs on: 4 channels of ring/Simple take longer than 16
    free_t, _ = collective_times(replace(one, library=replace(one.library, algorithms=("ring",),
                                                              nccl_env={"NCCL_PROTO": "Simple"})), 2, [64 << 20])
    tuned_t, picks = collective_times(tuned, 2, [64 << 20])
    assert picks == ["ring/Simple"] and tuned_t[0] >= free_t[0]
    # NVLS-tree is not possible on one GPU per server: NCCL's own choice stands
    assert nccl_choices(tuned, 2, [1 << 20], "allgather")[0][0] != "nvls_tree"


def test_bad_tuner_input_says_what_to_change(tmp_path):
    with pytest.raises(ValueError, match="no communicator_configs"):
        read_textproto("# nothing\n")
    with pytest.raises(ValueError, match="an ALGO_ and a PROTO_"):
        read_textproto(TEXTPROTO.replace("ALGO_TREE", "ALGO_STAR"))
    with pytest.raises(ValueError, match="is not closed"):
        read_textproto("communicator_configs { node_range: { min: 2 ")
    data = json.loads(dumps(load_cluster(CORPUS / "h100-ndr-8node" / "cluster.json")))
    data["library"]["tuner"] = [{"nodes": [3, 2], "ranks_per_node": [1, 0], "collective": "allreduce",
                                 "per_rank_bytes": [0, 0], "algorithm": "ring", "protocol": "LL"}]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"tuner\[0\]: tuner rule nodes"):
        load_cluster(path)


def test_a_misshapen_tuner_file_is_a_clear_error_and_blocks_stay_apart():
    for bad, said in (("communicator_configs: 3", "communicator_configs is a value where"),
                      ("communicator_configs { node_range: 5 }", "node_range is a value where"),
                      ("communicator_configs { node_range { min { } } }", "min is a { ... } block where"),
                      (TEXTPROTO.replace("num_channel: 2", "num_channel: x"), "num_channel 'x' is not a whole"),
                      (TEXTPROTO.replace("min: 2 max: 3", "min: 3 max: 2"), r"communicator_configs\[0\]: tuner rule")):
        with pytest.raises(ValueError, match=said):
            read_textproto(bad, "t.textproto")
    # two blocks with the same ranges: the first decides, the second's rules are not mixed in
    twice = read_textproto(TEXTPROTO + TEXTPROTO.replace("ALGO_RING protocol: PROTO_SIMPLE", "ALGO_TREE protocol: "
                                                                                          "PROTO_SIMPLE"))
    assert {r.communicator for r in twice} == {0, 1}
    assert tuner_rule(twice, 2, 1, "allreduce", 1 << 20).algorithm == "ring"
