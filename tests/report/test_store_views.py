"""result_tables: a record's results as tables people read: lists of rows and dicts of dicts as tables of
their own, the rest as key / value, long lists of numbers summarised (not one value per line)."""

from __future__ import annotations

from fabriclab.report.store_views import result_tables, summarise_numbers


def test_a_calibrate_shaped_result_becomes_one_table_per_part():
    results = {"parameters": {"library.launch_s": {"value": 4e-6, "prior": 4e-6},
                              "server.nic_efficiency": {"value": 0.74, "prior": 0.99}},
               "residuals": [{"num_gpus": 2, "size_bytes": 8, "error_pct": 1.5},
                             {"num_gpus": 2, "size_bytes": 16, "error_pct": -2.0}],
               "held_out_rows": [], "nccl_version": "2.7.8"}
    tables = dict(result_tables(results))
    assert tables[""] == [{"key": "nccl_version", "value": "2.7.8"}]
    assert tables["parameters"] == [{"name": "library.launch_s", "value": 4e-6, "prior": 4e-6},
                                    {"name": "server.nic_efficiency", "value": 0.74, "prior": 0.99}]
    assert [r["size_bytes"] for r in tables["residuals"]] == [8, 16] and "held_out_rows" not in tables


def test_a_2048_value_list_is_one_summary_line():
    finish = [1.0 + i / 1000 for i in range(2048)]
    tables = dict(result_tables({"num_ranks": 2048, "runtimes": {"ours": {"rank_finish_s": finish, "images_per_sec": 9.5}}}))
    pairs = {r["key"]: r["value"] for r in tables[""]}
    assert pairs["runtimes.ours.rank_finish_s"] == "2048 values: min 1, median 2.0235, max 3.047"
    assert pairs["runtimes.ours.images_per_sec"] == 9.5 and len(pairs) == 3


def test_rows_stay_one_table_and_summaries_skip_what_is_not_numbers():
    assert result_tables([{"a": 1}, {"a": 2}]) == [("", [{"a": 1}, {"a": 2}])]
    assert result_tables({"rows": [{"a": 1}]}) == [("", [{"a": 1}])]
    assert summarise_numbers([3, 1, 2, 4]) == {"count": 4, "min": 1, "median": 2.5, "max": 4}
    assert summarise_numbers(["a", 1]) is None and summarise_numbers([]) is None
