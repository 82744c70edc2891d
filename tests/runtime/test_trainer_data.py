"""Parallel data readers and the TFRecord format: round trip, rank shards, named errors, replay timing."""

from __future__ import annotations

import time

import pytest
import torch

from fabriclab.runtime.data import ShardReader, list_shards, make_dataset, rank_shards
from fabriclab.runtime.replay import ReplayNet, layer_times, replay_batch, replay_loss
from fabriclab.runtime.tfrecord import crc32c, decode_example, encode_example, masked_crc, read_records
from fabriclab.workload.profile import GradReady, LayerTime, Profile, load_profile


def crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.mark.parametrize("length", [0, 1, 255, 256, 257, 1000, 3 * 1024 + 17])
def test_crc32c_matches_the_bitwise_definition(length):
    data = bytes((i * 131 + 7) % 256 for i in range(length))
    assert crc32c(data) == crc32c_bitwise(data)


def test_crc32c_check_value_and_tfrecord_mask():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    # TensorFlow's masked crc of an 8-byte little-endian length 0, as its record writer emits it.
    assert masked_crc(bytes(8)) == ((((crc32c(bytes(8)) >> 15) | (crc32c(bytes(8)) << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def test_example_round_trip():
    features = {"image/encoded": b"\x00\x01\xff", "image/format": b"raw", "image/class/label": 999,
                "image/height": 32}
    assert decode_example(encode_example(features)) == features


def test_dataset_round_trip_and_rank_shards(tmp_path):
    paths = make_dataset(tmp_path, num_shards=4, num_images=24, image_size=8, num_classes=10)
    assert [p.name for p in list_shards(tmp_path)] == [f"train-0000{i}-of-00004" for i in range(4)]
    assert sum(1 for p in paths for _ in read_records(p)) == 24
    mine = rank_shards(list_shards(tmp_path), 1, 2)
    assert [p.name for p in mine] == ["train-00001-of-00004", "train-00003-of-00004"]
    reader = ShardReader(mine, 4, prefetch=2)
    x, y = reader.next()
    reader.close()
    assert x.shape == (4, 3, 8, 8) and x.dtype == torch.float32 and -1 <= x.min() and x.max() <= 1
    assert y.dtype == torch.int64 and 0 <= y.min() and y.max() < 10


def test_a_missing_shard_is_named(tmp_path):
    make_dataset(tmp_path, num_shards=4, num_images=8, image_size=4)
    (tmp_path / "train-00002-of-00004").unlink()
    with pytest.raises(ValueError, match="train-00002-of-00004 is missing"):
        list_shards(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="holds no shards"):
        list_shards(empty)
    with pytest.raises(ValueError, match="does not exist"):
        list_shards(tmp_path / "nowhere")


def test_too_few_shards_for_the_ranks(tmp_path):
    with pytest.raises(ValueError, match="2 shards for 4 ranks"):
        rank_shards(make_dataset(tmp_path, num_shards=2, num_images=4, image_size=4), 0, 4)


def test_a_corrupt_shard_is_named_by_the_reader(tmp_path):
    paths = make_dataset(tmp_path, num_shards=1, num_images=3, image_size=4)
    data = bytearray(paths[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    paths[0].write_bytes(bytes(data))
    reader = ShardReader(paths, 1)
    with pytest.raises(ValueError, match=r"train-00000-of-00001: record \d at byte \d+ is corrupt"):
        for _ in range(3):
            reader.next()


@pytest.mark.xdist_group("timing")  # times a 0.2 s sleep to 0.1 s (tests/conftest.py)
def test_replay_splits_the_profile_and_sleeps_it_out():
    profile = Profile(model="toy", device="V100", batch_size=32, iteration_s=0.1,
                      grads=(GradReady(name="c", size_bytes=40, ready_s=0.01),
                             GradReady(name="b", size_bytes=400, ready_s=0.03),
                             GradReady(name="a", size_bytes=4000, ready_s=0.04)))
    forward, backward, elements = layer_times(profile, dilation=2.0)
    assert elements == [1000, 100, 10]  # forward order
    assert backward == pytest.approx([0.02, 0.04, 0.02])
    assert sum(forward) == pytest.approx(2 * (0.1 - 0.04)) and forward[1] == pytest.approx(2 * forward[0])
    net = ReplayNet(profile, dilation=2.0)
    start = time.perf_counter()
    replay_loss(net(replay_batch(4)[0]), None).backward()
    assert 0.2 <= time.perf_counter() - start < 0.3
    assert [p.grad.shape for p in net.parameters()] == [(1000,), (100,), (10,)]
    with_layers = Profile(model="toy", device="cpu", batch_size=1, iteration_s=1.0, grads=profile.grads,
                          layers=(LayerTime(name="x", param_bytes=4, forward_s=0.5),))
    assert sum(layer_times(with_layers)[0]) == pytest.approx(0.5)
    assert len(layer_times(load_profile("resnet50"))[0]) == 161
