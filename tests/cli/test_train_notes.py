"""`train`'s notes under its table: ranks sharing CPU cores, and a replay marked as dilated (the title too)."""

from __future__ import annotations

from fabriclab.bench.train.config import TrainBenchConfig
from fabriclab.cli.train import result_table, run_notes
from fabriclab.report.tables import table_data

SUMMARY = {"images_per_sec": 12.5, "scaling_factor": 0.294, "params_agree": True}
RESULT = {"num_ranks": 4, "global_batch": 32, "per_rank_batch": 8, "runtimes": {"ours": SUMMARY}}


def test_four_ranks_on_two_cores_say_that_they_share_them():
    (note,) = run_notes(RESULT, TrainBenchConfig(num_ranks=4), cores=2)
    assert note.startswith("note: 4 ranks share 2 CPU cores") and "scaling factor (0.294)" in note
    assert run_notes(RESULT, TrainBenchConfig(num_ranks=4), cores=4) == []


def test_a_replay_is_marked_dilated_in_the_title_and_a_note():
    config = TrainBenchConfig(num_ranks=4, replay="resnet50", dilation=10.0)
    notes = run_notes(RESULT, config, cores=8)
    assert len(notes) == 1 and notes[0].startswith("note: dilated replay: every compute time is resnet50's")
    title, _, rows = table_data(result_table(RESULT, config))
    assert title.startswith("dilated replay of resnet50 x10, 4 ranks") and rows[0][:2] == ["ours", "12.50"]
    assert not table_data(result_table(RESULT, TrainBenchConfig(num_ranks=4)))[0].startswith("dilated")
