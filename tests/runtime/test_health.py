"""Rank health without processes: a dict stands in for the rendezvous store, so each verdict of
`diagnose` and `arrive` is checked on a state built by hand (the launch tests check them end to end)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from fabriclab.runtime.environment import LaunchError
from fabriclab.runtime.health import Heartbeat, arrive, diagnose, first_line, settle

INTERVAL_S = 0.02


class DictStore:
    """The store methods health uses, on a dict (thread-safe: heartbeats run on threads)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def set(self, key: str, value: str) -> None:
        with self.lock:
            self.data[key] = value.encode()

    def get(self, key: str) -> bytes:
        with self.lock:
            return self.data[key]

    def add(self, key: str, amount: int) -> int:
        with self.lock:
            value = int(self.data.get(key, b"0")) + amount
            self.data[key] = str(value).encode()
            return value

    def check(self, keys: list[str]) -> bool:
        with self.lock:
            return all(k in self.data for k in keys)


def _world(store: DictStore, arrived: list[int], beating: list[int], marks: dict[int, str]) -> list[Heartbeat]:
    for r in arrived:
        store.set(f"arrived/{r}", "1")
    for r, mark in marks.items():
        store.set(f"mark/{r}", mark)
    beats = [Heartbeat(store, r, timeout_s=10 * INTERVAL_S) for r in beating]
    for beat in beats:
        beat.start()
    return beats


def test_diagnose_names_each_kind_of_peer_at_fault():
    store = DictStore()
    # rank 0 fails at step 5; 1 is behind, 2 is at step 5 but stuck, 3 is dead, 4 never arrived, 5 failed too.
    beats = _world(store, arrived=[0, 1, 2, 3, 5], beating=[1, 2, 5],
                   marks={1: "4 iteration 3", 2: "5 iteration 4"})
    store.set("failed/5", "rank 5 failed")
    ctx = SimpleNamespace(step=5, label="iteration 4")
    try:
        error = diagnose(store, 0, 6, ctx, RuntimeError("Connection closed by peer"), INTERVAL_S)
    finally:
        for beat in beats:
            beat.stop()
    text = str(error)
    assert text.startswith("rank 0 failed at step 5 (iteration 4): RuntimeError: Connection closed by peer; ")
    assert "rank 1 did not reach step 5 (iteration 4); it is at step 4 (iteration 3)" in text
    assert "rank 2 is alive at step 5 (iteration 4) but never joined the collective" in text
    assert "rank 3 stopped responding" in text and "rank 4 never arrived" in text
    assert text.endswith("also failed: rank 5")
    assert error.ranks == (1, 2, 3, 4)
    assert store.check(["failed/0"])


def test_diagnose_blames_the_rank_itself_for_its_own_error():
    store = DictStore()
    error = diagnose(store, 2, 4, None, ValueError("boom"), INTERVAL_S)
    assert str(error) == "rank 2 failed: ValueError: boom" and error.ranks == (2,)


def test_diagnose_without_a_store_blames_its_host():
    class Gone(DictStore):
        def set(self, key, value):
            raise ConnectionError("store closed")

    error = diagnose(Gone(), 1, 2, None, RuntimeError("timed out"), INTERVAL_S)
    assert "the rendezvous store is unreachable" in str(error) and error.ranks == (0,)


@pytest.mark.xdist_group("timing")  # a bound of 1-2 s on its wait (tests/conftest.py)
def test_arrive_waits_a_bounded_time_and_names_the_absent():
    store = DictStore()
    for r in (0, 2):
        store.set(f"arrived/{r}", "1")
        store.add("arrivals", 1)
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"ranks 3, 4 never arrived within 0.2 s \(rank 1 waited\)") as info:
        arrive(store, 1, 5, timeout_s=0.2)
    assert time.monotonic() - start < 2 and info.value.ranks == (3, 4)


@pytest.mark.xdist_group("timing")  # a bound of 1-2 s on its wait (tests/conftest.py)
def test_settle_returns_once_the_pending_peers_go_silent():
    store = DictStore()
    store.set("arrived/0", "1")
    store.set("arrived/1", "1")  # never done nor failed, and never beats: silent at once
    start = time.monotonic()
    settle(store, 2, limit_s=5.0, interval_s=INTERVAL_S)
    assert time.monotonic() - start < 1.0


def test_first_line_drops_gloo_source_locations():
    exc = RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out\nmore")
    assert first_line(exc) == "Timed out"
