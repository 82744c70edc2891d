"""The residuals of a calibration for people: the busbw each error compares with (nccl-tests prints two
decimals, `0.00` for 8 B), bands that cover every size (16-512 KB too), and a note where the model's time
falls from one size to the next larger (NCCL's tuning switches protocol there)."""

from __future__ import annotations

import pytest

from fabriclab.report.calibrate import band_summary, band_table_rows, measured_busbw, switch_notes


def _row(size, measured, predicted, error, choice="ring/LL", gpus=2):
    return {"source": "nccl_2.log", "num_gpus": gpus, "size_bytes": size, "choice": choice,
            "measured_busbw_GBps": measured, "predicted_busbw_GBps": predicted, "error_pct": error,
            "collective": "allreduce"}


ROWS = [_row(8, 0.0, 0.0008778, -5.1), _row(16 << 10, 1.1, 1.437, 30.3), _row(64 << 10, 2.74, 3.586, 31.1),
        _row(512 << 10, 10.7, 6.362, -40.5), _row(1 << 20, 17.63, 17.26, -2.1, "ring/LL128"),
        _row(64 << 20, 172.8, 170.7, -1.2, "ring/Simple")]


def test_the_measured_busbw_of_a_row_the_log_prints_as_zero_has_its_digits():
    assert measured_busbw(ROWS[0]) == pytest.approx(0.0008778 / 0.949)
    assert measured_busbw(ROWS[4]) == pytest.approx(17.63, rel=1e-3)  # where the log's digits suffice


def test_bands_cover_16_to_512_kb_with_its_worst_row():
    (kb,) = [s for s in band_summary(ROWS) if s["band"] == "16-512 KB"]
    assert kb["rows"] == 3 and kb["max_abs_error_pct"] == 40.5 and kb["median_abs_error_pct"] == 31.1
    headers, rows = band_table_rows(ROWS)
    assert headers == ["GPUs", "<= 8 KB", "16-512 KB", "1-32 MB", ">= 64 MB"]
    assert rows == [["2", "5.1 / 5.1", "31.1 / 40.5", "2.1 / 2.1", "1.2 / 1.2"]]


def test_a_larger_size_predicted_faster_carries_a_note_of_the_switch():
    (note,) = switch_notes(ROWS)
    assert note.startswith("2 GPUs, 512KB -> 1MB: the model's time falls (82.41 -> 60.75 us)")
    assert note.endswith("switches ring/LL -> ring/LL128")
    assert switch_notes(ROWS[:4]) == []
