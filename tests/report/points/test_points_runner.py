"""The points runner: the same bytes from every local pool, points kept as they finish, resume after
Ctrl-C, progress lines (report/points). The real Dask cluster: test_points_dask_cluster.py."""

import io
import json
import multiprocessing
import sqlite3
import time
from fractions import Fraction

import pytest

from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import PlanSpec, plan_points, run_plan
from fabriclab.report.points.pools import make_pool, pack, to_json
from fabriclab.report.points.progress import Progress
from fabriclab.report.points.runner import PointRunner, chunk_size
from fabriclab.workload.profile import load_profile


def small_spec(**kw) -> PlanSpec:
    args = dict(profiles=(load_profile("resnet50"),), gpus=(8, 16, 32, 64), fabrics=("25gbe", "100gbe", "400g-ndr"),
                bisections=(Fraction(1), Fraction(1, 4)), prices=load_prices())
    return PlanSpec(**(args | kw))


def answer_bytes(result) -> str:
    """The plan's answer (rows, recommendations, skipped) as JSON text: equal text, equal answer."""
    return json.dumps([result.rows, result.recommendations, result.skipped], allow_nan=True)


def stored_count(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM points").fetchone()[0]


def test_the_answer_is_the_same_bytes_in_this_process_and_in_a_process_pool(tmp_path):
    direct = run_plan(small_spec())  # the library's own loop, no runner
    with PointRunner(store=tmp_path / "a.db", show_progress=False) as here:
        one = run_plan(small_spec(), run_points=here)
    with PointRunner(workers=2, store=tmp_path / "b.db", show_progress=False) as pool:
        two = run_plan(small_spec(), run_points=pool)
    assert answer_bytes(one) == answer_bytes(two) == answer_bytes(direct)
    assert one.stats["num_simulations"] == direct.stats["num_simulations"] > 0
    assert stored_count(tmp_path / "a.db") == stored_count(tmp_path / "b.db") == len(plan_points(small_spec()))


def test_ctrl_c_keeps_what_finished_and_resume_runs_only_the_rest(tmp_path):
    store, total = tmp_path / "r.db", len(plan_points(small_spec()))

    def interrupt(done, total):
        if done >= 5:
            raise KeyboardInterrupt

    err = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with PointRunner(store=store, stream=err, on_progress=interrupt) as runner:
            run_plan(small_spec(), run_points=runner)
    kept = stored_count(store)
    assert kept == 5 and "--resume" in err.getvalue()  # every finished point, in one last transaction
    with PointRunner(store=store, resume=True, show_progress=False) as runner:
        resumed = run_plan(small_spec(), run_points=runner)
    assert runner.stats[-1].resumed == 5 and runner.stats[-1].computed == total - 5
    assert stored_count(store) == total
    assert answer_bytes(resumed) == answer_bytes(run_plan(small_spec()))


def test_resume_skips_only_points_of_the_same_configuration(tmp_path):
    store = tmp_path / "s.db"
    with PointRunner(store=store, show_progress=False) as runner:
        run_plan(small_spec(), run_points=runner)
    with PointRunner(store=store, resume=True, show_progress=False) as runner:
        run_plan(small_spec(), run_points=runner)  # the same question: everything from the store
        run_plan(small_spec(target=0.95), run_points=runner)  # another question: nothing from the store
    same, other = runner.stats
    assert (same.resumed, same.computed) == (len(plan_points(small_spec())), 0)
    assert (other.resumed, other.computed) == (0, len(plan_points(small_spec())))


def test_bad_runner_options_say_what_to_change():
    with pytest.raises(ValueError, match="--store PATH"):
        PointRunner(resume=True, store=None)
    with pytest.raises(ValueError, match="whole number"):
        make_pool(None, 0)
    with pytest.raises(ValueError, match="drop one of the two"):
        make_pool("tcp://127.0.0.1:1", 2)
    pytest.importorskip("distributed")
    with pytest.raises(ValueError, match="tcp://"):
        make_pool("127.0.0.1:8786")


def test_results_are_json_text_and_odd_types_are_refused():
    import numpy as np

    assert to_json({"a": (1, np.float64(0.5), np.int64(3)), "b": float("nan")}) == '{"a":[1,0.5,3],"b":NaN}'
    with pytest.raises(TypeError, match="JSON types"):
        to_json({"a": object()})


def test_chunks_keep_every_slot_busy_and_stay_small():
    assert chunk_size(10, 2) == 1 and chunk_size(300, 2) == 18 and chunk_size(10**6, 4) == 32


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_in_a_pipe_is_a_log_line_every_ten_seconds_with_rate_and_time_left():
    out, clock = io.StringIO(), FakeClock()
    p = Progress("plan points", 1000, resumed=100, where="dask tcp://h:1", stream=out, clock=clock)
    clock.t = 5.0
    p.advance(50)
    assert out.getvalue() == ""  # not yet: a log gets a line every LOG_EVERY_S
    clock.t = 10.0
    p.advance(50)
    assert out.getvalue() == ("plan points: 200 / 1,000 (20.0%), 10.0/s, 1 min 20 s left, 100 from the store "
                              "[dask tcp://h:1]\n")
    p.close()
    assert out.getvalue().splitlines()[-1] == ("plan points: 200 / 1,000 in 10 s (100 from the store, 100 run now) "
                                               "[dask tcp://h:1]")


def test_progress_on_a_terminal_rewrites_one_line():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out, clock = Tty(), FakeClock()
    p = Progress("points", 4, stream=out, clock=clock)
    clock.t = 1.0
    p.advance(1)
    clock.t = 2.0
    p.advance(1)
    assert out.getvalue().count("\r\033[K") == 2 and "\n" not in out.getvalue()
    p.close()
    assert out.getvalue().endswith("\r\033[Kpoints: 2 / 4 in 2 s\n")


def die_on_three(context, point):
    """A point function whose process dies at point 3 (as one killed for memory)."""
    if point == 3:
        import os

        os._exit(9)
    return point


def test_a_local_process_that_dies_is_an_error_that_says_to_resume(tmp_path):
    store, err = tmp_path / "d.db", io.StringIO()
    with pytest.raises(ValueError, match="died .*--resume"):
        with PointRunner(workers=2, store=store, stream=err) as runner:
            runner(die_on_three, None, list(range(8)))
    assert "--resume" in err.getvalue()


def sleep_on_three(context, point):
    """A point function that takes minutes at point 3 (as a fat tree of 16,384 hosts does)."""
    if point == 3:
        time.sleep(300)
    return point


def test_an_aborted_local_pool_ends_the_running_point_instead_of_waiting_for_it():
    # SIGTERM reaches only the CLI's process: the pool's processes must be ended by it, not left running.
    others = set(multiprocessing.active_children())
    pool = make_pool(None, 2)
    answers = pool.run(sleep_on_three, *pack(None), [[(0, 0)], [(3, 3)]])
    assert next(answers) == [(0, "0")]
    workers = set(multiprocessing.active_children()) - others
    assert len(workers) == 2
    t0 = time.monotonic()
    pool.close(abort=True)
    assert time.monotonic() - t0 < 10 and not any(p.is_alive() for p in workers)
    answers.close()
