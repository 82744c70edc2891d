"""Tests of the quantity parser: accepted forms, base units, and the messages for rejected input."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabriclab.units import (check_link_bandwidth, check_link_latency, format_int_list, format_size,
                             parse_bandwidth, parse_int_list, parse_rank_range, parse_ratio, parse_size,
                             parse_size_range, parse_time)

KIB, MIB, GIB = 1024, 1024**2, 1024**3


@pytest.mark.parametrize("text, size_bytes", [
    ("0", 0), ("4", 4), ("4B", 4), (" 4 B ", 4),
    ("64KB", 64 * KIB), ("64KiB", 64 * KIB), ("64K", 64 * KIB), ("64k", 64 * KIB),
    ("256MB", 256 * MIB), ("256M", 256 * MIB), ("1GB", GIB), ("1GiB", GIB), ("2TB", 2 * 1024**4),
    ("1.5KB", 1536), ("0.5MB", 512 * KIB), ("1e3", 1000),
])
def test_size_is_binary(text, size_bytes):
    assert parse_size(text) == size_bytes
    assert isinstance(parse_size(text), int)


@pytest.mark.parametrize("text, fragment", [
    ("", "expected a byte count"), ("abc", "'abc'"), ("64Kb", "expected a byte count"),
    ("-4B", "'-4B'"), ("4XB", "64KB"), ("iB", "'iB'"), ("4iB", "'4iB'"), ("0.5B", "not a whole number"),
    ("1.3B", "not a whole number"), ("4 GB/s", "'4 GB/s'"),
])
def test_size_rejects(text, fragment):
    with pytest.raises(ValueError, match="invalid size") as err:
        parse_size(text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, bandwidth_Bps", [
    ("25Gbps", 25e9 / 8), ("100Gbit/s", 100e9 / 8), ("100Mbit/s", 100e6 / 8), ("10Gb/s", 10e9 / 8),
    ("4GB/s", 4e9), ("12.5GBps", 12.5e9), ("1kB/s", 1e3), ("1GiB/s", GIB), ("8bps", 1.0),
    ("800 Mbps", 1e8),
])
def test_bandwidth_is_decimal(text, bandwidth_Bps):
    assert parse_bandwidth(text) == pytest.approx(bandwidth_Bps)


@pytest.mark.parametrize("text", ["25", "25G", "25GB", "0Gbps", "fast", "-1Gbps", "iB/s", "25 Gbps/s"])
def test_bandwidth_rejects(text):
    with pytest.raises(ValueError, match="invalid bandwidth") as err:
        parse_bandwidth(text)
    assert repr(text.strip()) in str(err.value)


@pytest.mark.parametrize("text, seconds", [
    ("0.2us", 0.2e-6), ("0.2µs", 0.2e-6), ("200ns", 200e-9), ("5ms", 5e-3), ("1s", 1.0), ("60", 60.0),
    ("0", 0.0), (".5", 0.5),
])
def test_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5 min", "1h", "-1s", "5mss", "fast"])
def test_time_rejects(text):
    with pytest.raises(ValueError, match=r"invalid time .*expected a time with unit ns, us, ms or s"):
        parse_time(text)


@pytest.mark.parametrize("text", ["1kbps", "1Pbps", "25Gbps", "125B/s", "125TB/s"])
def test_link_bandwidth_range_keeps_its_ends(text):
    assert check_link_bandwidth(parse_bandwidth(text), "--link", text) == parse_bandwidth(text)


@pytest.mark.parametrize("text", ["999bps", "1.001Pbps", "1e-300Gbps", "1e300Gbps", "1e400Gbps"])
def test_link_bandwidth_range_refuses_the_rest(text):
    with pytest.raises(ValueError, match=r"give a rate from 1 kbit/s to 1 Pbit/s") as err:
        check_link_bandwidth(parse_bandwidth(text), "--link", text)
    assert str(err.value).startswith(f"--link {text!r} is ")


@pytest.mark.parametrize("text, ok", [("0", True), ("10s", True), ("0.2us", True), ("10.001s", False),
                                      ("1e300s", False), ("1e400s", False)])
def test_link_latency_range(text, ok):
    if ok:
        assert check_link_latency(parse_time(text), "--latency", text) == parse_time(text)
    else:
        with pytest.raises(ValueError, match=r"give a latency from 0 to 10 s"):
            check_link_latency(parse_time(text), "--latency", text)


@pytest.mark.parametrize("text, value", [("1/4", 0.25), ("1 / 16", 1 / 16), ("0.25", 0.25), ("1", 1.0),
                                         ("2/2", 1.0)])
def test_ratio(text, value):
    assert parse_ratio(text) == pytest.approx(value)


@pytest.mark.parametrize("text, fragment", [
    ("0", "it is 0"), ("5/4", "it is 1.25"), ("1/0", "denominator is zero"), ("a/b", "expected a fraction"),
    ("1/", "expected a fraction"), ("-1/4", "expected a fraction"), ("", "expected a fraction"),
])
def test_ratio_rejects(text, fragment):
    with pytest.raises(ValueError, match="invalid ratio") as err:
        parse_ratio(text)
    assert fragment in str(err.value)


def test_size_range_sweeps_powers_of_two_like_nccl_tests():
    assert parse_size_range("4B:256MB") == [4 * 2**i for i in range(27)]
    assert parse_size_range("1KB:16MB") == [KIB * 2**i for i in range(15)]
    assert parse_size_range("1KB:16MB:x4") == [KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB,
                                               16 * MIB]
    assert parse_size_range("3:20") == [3, 6, 12]
    assert parse_size_range("8:8") == [8]


def test_size_range_lists_and_single_sizes():
    assert parse_size_range("1KB,64KB,1MB") == [KIB, 64 * KIB, MIB]
    assert parse_size_range("64KB") == [64 * KIB]
    assert parse_size_range("0") == [0]


@pytest.mark.parametrize("text, fragment", [
    ("256MB:4B", "start is larger than the end"), ("0:4KB", "start at 1 byte"),
    ("4B:1MB:x1", "factor must be written xF"), ("4B:1MB:2", "factor must be written xF"),
    ("4B:1MB:x2:x2", "expected start:end"), ("4B:", "expected start:end"), ("1KB,,2KB", "empty item"),
    ("4XB:1MB", "invalid size '4XB'"),
])
def test_size_range_rejects(text, fragment):
    with pytest.raises(ValueError) as err:
        parse_size_range(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize("text, ranks", [
    ("3", [3]), ("1-4", [1, 2, 3, 4]), ("1,2,4,8", [1, 2, 4, 8]), ("1-3,16", [1, 2, 3, 16]),
    ("8,1,8", [1, 8]), (" 2 - 3 ", [2, 3]),
])
def test_rank_range(text, ranks):
    assert parse_rank_range(text) == ranks


@pytest.mark.parametrize("text, fragment", [
    ("0", "values start at 1, got 0"), ("0-4", "values start at 1"), ("abc", "expected one number"),
    ("4-1", "runs backwards; write 1-4"), ("1,,2", "empty item"), ("", "empty item"), ("1.5", "'1.5'"),
    ("-3", "'-3'"),
])
def test_rank_range_rejects(text, fragment):
    with pytest.raises(ValueError, match="invalid rank count") as err:
        parse_rank_range(text)
    assert fragment in str(err.value)


def test_int_list_allows_zero_when_asked():
    assert parse_int_list("0,1,7,1001", minimum=0, what="element count") == [0, 1, 7, 1001]
    with pytest.raises(ValueError, match="invalid element count"):
        parse_int_list("x", what="element count")


def test_non_text_input_is_rejected():
    with pytest.raises(ValueError, match="expected text"):
        parse_size(4)  # type: ignore[arg-type]


@given(st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=30))
def test_format_int_list_round_trips(values):
    assert parse_rank_range(format_int_list(values)) == sorted(set(values))


@given(st.integers(min_value=0, max_value=2**50))
def test_format_size_round_trips(size_bytes):
    assert parse_size(format_size(size_bytes)) == size_bytes


def test_format_size_picks_the_largest_exact_unit():
    assert [format_size(n) for n in (0, 1536, KIB, 3 * MIB, GIB)] == ["0B", "1536B", "1KB", "3MB", "1GB"]
