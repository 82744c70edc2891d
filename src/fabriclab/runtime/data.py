"""Parallel data readers (S-Caffe, Awan et al. section 4.1): each rank reads its own shards into a queue.

A dataset is a folder of TFRecord shards named like Samsi et al.'s ImageNet, `train-00000-of-01024` ...
(`fabriclab.runtime.tfrecord`). Rank r of n reads shards r, r+n, r+2n, ... over and over, on a reader
thread of its own that decodes whole batches into a bounded prefetch queue (S-Caffe's distributed
queues: no rank waits for another rank's reads), so the step only pops a ready batch. Every shard must
be there (the `-of-N` suffix says how many) and every record intact: the error names the file.
`SyntheticSource` is the in-memory mode (tf_cnn_benchmarks' synthetic data): one fixed random batch
per rank, no files. `on_device` puts either on the rank's GPU: the synthetic batch once, the reader's
batches through pinned memory with an asynchronous copy each step.

Try it: `fabriclab data make --out /tmp/synth --shards 8 --images 512 --image-size 32`, then
`fabriclab train --data /tmp/synth --model resnet50 --np 4 --batch-size 8 --steps 5 --warmup 1`.
"""

from __future__ import annotations

import queue
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fabriclab.runtime.tfrecord import decode_example, encode_example, read_records, write_record

if TYPE_CHECKING:  # torch is imported where batches are made: `fabriclab data make` needs none of it
    import torch

SHARD_RE = re.compile(r"^train-(\d{5})-of-(\d{5})$")
NUM_CLASSES = 1000  # ImageNet's ILSVRC 2012 classes
CHANNELS = 3


def shard_name(index: int, num_shards: int) -> str:
    return f"train-{index:05d}-of-{num_shards:05d}"


def make_dataset(out_dir: str | Path, *, num_shards: int, num_images: int, image_size: int,
                 num_classes: int = NUM_CLASSES, seed: int = 0) -> list[Path]:
    """Write `num_images` random images (uint8 noise, uniform labels) round-robin into shards."""
    if num_shards < 1 or num_images < num_shards:
        raise ValueError(f"need at least one image per shard: {num_images} images for {num_shards} shards")
    if not 1 <= image_size <= 4096:
        raise ValueError(f"image size {image_size} is out of range: use 1..4096 pixels")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = [out / shard_name(i, num_shards) for i in range(num_shards)]
    files = [open(p, "wb") for p in paths]
    try:
        for i in range(num_images):
            pixels = rng.integers(0, 256, (image_size, image_size, CHANNELS), dtype=np.uint8)
            example = encode_example({
                "image/encoded": pixels.tobytes(), "image/format": b"raw", "image/height": image_size,
                "image/width": image_size, "image/channels": CHANNELS,
                "image/class/label": int(rng.integers(0, num_classes))})
            write_record(files[i % num_shards], example)
    finally:
        for f in files:
            f.close()
    return paths


def list_shards(directory: str | Path) -> list[Path]:
    """All shards of a dataset folder in order; a ValueError names a missing shard or a bad folder."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"dataset folder {folder} does not exist: make one with `fabriclab data make --out {folder}`")
    found = {}
    totals = set()
    for path in folder.iterdir():
        match = SHARD_RE.match(path.name)
        if match:
            found[int(match.group(1))] = path
            totals.add(int(match.group(2)))
    if not found:
        raise ValueError(f"{folder} holds no shards named train-NNNNN-of-NNNNN: make them with "
                         f"`fabriclab data make --out {folder}`")
    if len(totals) > 1:
        raise ValueError(f"{folder} mixes shards of {sorted(totals)} files: keep one dataset per folder")
    total = totals.pop()
    missing = [i for i in range(total) if i not in found]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"shard {folder / shard_name(missing[0], total)} is missing{more}: re-make the "
                         f"dataset with `fabriclab data make --out {folder} --shards {total}`")
    return [found[i] for i in range(total)]


def rank_shards(shards: list[Path], rank: int, world_size: int) -> list[Path]:
    """Rank r's shards: r, r+n, ... (S-Caffe's parallel readers, one file set per process)."""
    if len(shards) < world_size:
        raise ValueError(f"the dataset has {len(shards)} shards for {world_size} ranks: every rank reads "
                         f"its own shards, so make at least {world_size} (fabriclab data make --shards)")
    return shards[rank::world_size]


def image_size_of(shard: Path) -> int:
    """Height of the first image of a shard (all images of a dataset share one size)."""
    for record in read_records(shard):
        return int(decode_example(record)["image/height"])
    raise ValueError(f"{shard}: the shard holds no records")


def decode_image(record: bytes, path: Path) -> tuple[np.ndarray, int]:
    ex = decode_example(record)
    try:
        h, w, c = int(ex["image/height"]), int(ex["image/width"]), int(ex["image/channels"])
        pixels = np.frombuffer(ex["image/encoded"], dtype=np.uint8).reshape(h, w, c)
        return pixels, int(ex["image/class/label"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path}: a record is not a raw image Example ({exc})") from None


class ShardReader:
    """Batches of this rank's shards from a reader thread and a prefetch queue of `prefetch` batches."""

    def __init__(self, shards: list[Path], batch_size: int, *, prefetch: int = 4) -> None:
        if not shards:
            raise ValueError("a reader needs at least one shard")
        if batch_size < 1 or prefetch < 1:
            raise ValueError(f"batch size and prefetch depth must be >= 1, got {batch_size} and {prefetch}")
        self.shards, self.batch_size = shards, batch_size
        self._queue: queue.Queue = queue.Queue(maxsize=prefetch)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="fabriclab-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        images, labels = [], []
        try:
            while not self._stop.is_set():
                for path in self.shards:
                    for record in read_records(path):
                        pixels, label = decode_image(record, path)
                        images.append(pixels)
                        labels.append(label)
                        if len(images) == self.batch_size:
                            self._put(_to_batch(images, labels))
                            images, labels = [], []
                        if self._stop.is_set():
                            return
        except BaseException as exc:  # handed to the consumer, which raises it with the file name
            self._put(exc)

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        item = self._queue.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        return item

    def close(self) -> None:
        self._stop.set()


def _to_batch(images: list[np.ndarray], labels: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous().float()
    return x.div_(127.5).sub_(1.0), torch.tensor(labels, dtype=torch.int64)


class SyntheticSource:
    """The same batch every step (tf_cnn_benchmarks' synthetic input): no files, no reader thread."""

    def __init__(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.batch = batch

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.batch

    def close(self) -> None:
        pass


class DeviceSource:
    """The batches of a reader on `device` (4-D ones channels-last when asked): each batch is pinned and
    copied without blocking the host, so the copy overlaps what the GPU still has queued."""

    def __init__(self, source, device: torch.device, channels_last: bool = False) -> None:
        self.source, self.device, self.channels_last = source, device, channels_last

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        from fabriclab.runtime.precision import prepare_batch

        batch = self.source.next()
        if self.device.type == "cuda":
            batch = tuple(t.pin_memory() for t in batch)
        return prepare_batch(batch, self.device, self.channels_last, non_blocking=True)

    def close(self) -> None:
        self.source.close()


def on_device(source, device: torch.device, channels_last: bool = False):
    """`source` with its batches on `device`: a synthetic batch moves once, a reader's batch per step."""
    if device.type == "cpu" and not channels_last:
        return source
    if isinstance(source, SyntheticSource):
        from fabriclab.runtime.precision import prepare_batch

        return SyntheticSource(prepare_batch(source.batch, device, channels_last))
    return DeviceSource(source, device, channels_last)
