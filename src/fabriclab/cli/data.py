"""`fabriclab data make`: write a synthetic image dataset as TFRecord shards, laid out like Samsi et al.'s ImageNet.

Samsi et al. (TX-GAIA) converted ImageNet to TFRecord and stored it in 1024 files; `make` writes random raw
images with uniform labels in that layout (`train-00000-of-01024`, ...), for `fabriclab train --data DIR`,
whose ranks then read their own shards in parallel (S-Caffe's parallel readers). The folder, the number
of open files and the free disk space are checked before anything is written. No torch is imported.

Try it: `fabriclab data make --out /tmp/imagenet-synth --shards 16 --images 1024 --image-size 32`.
"""

from __future__ import annotations

import resource
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, check_output_dir,
                                  print_error, user_errors)
from fabriclab.runtime.data import CHANNELS, NUM_CLASSES, make_dataset
from fabriclab.runtime.tfrecord import encode_example

app = typer.Typer(help="Datasets for `fabriclab train`: synthetic images as TFRecord shards.",
                  no_args_is_help=True, rich_markup_mode=None)
MAX_IMAGE_SIZE = 4096
# File descriptors kept for the interpreter, its libraries and stdio besides the open shards.
SPARE_FILES = 64
# The share of the free disk space a dataset may take.
DISK_SHARE = 0.9


def register(main_app: typer.Typer) -> None:
    """Add the `data` command group (with `make`) to `main_app`."""
    main_app.add_typer(app, name="data")


@app.command("make")
@user_errors
def make(
    out: Annotated[Path, typer.Option(help="Folder to write the shards into (created if missing).")],
    shards: Annotated[int, typer.Option(help="Number of shard files (Samsi et al.'s ImageNet: 1024).")] = 1024,
    images: Annotated[int, typer.Option(help="Images in all (spread round-robin over the shards).")] = 10240,
    image_size: Annotated[int, typer.Option(help="Image side in pixels.")] = 32,
    classes: Annotated[int, typer.Option(help="Number of labels.")] = NUM_CLASSES,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Write `--images` random images into `--shards` TFRecord files named train-NNNNN-of-NNNNN."""
    output = Output(fmt, json_path, store)
    check_output_dir(out, "--out")
    _check(out, shards, images, image_size, classes, seed)
    try:
        paths = make_dataset(out, num_shards=shards, num_images=images, image_size=image_size,
                             num_classes=classes, seed=seed)
    except OSError as exc:  # e.g. the disk filled up while writing
        print_error(f"writing the shards in {out} failed: {exc.strerror or exc}")
        raise typer.Exit(EXIT_FAILED) from None
    size = sum(p.stat().st_size for p in paths)
    if output.fmt in ("table", "plain"):
        output.note(f"wrote {images} images of {image_size}x{image_size} in {len(paths)} shards "
                    f"({size / 1e6:.1f} MB) to {out}")
    else:
        table = Table(title="dataset written")
        for column in ("folder", "shards", "images", "image size", "classes", "MB"):
            table.add_column(column)
        table.add_row(str(out), str(len(paths)), str(images), str(image_size), str(classes), f"{size / 1e6:.1f}")
        output.table(table)
    config = {"out": str(out), "shards": shards, "images": images, "image_size": image_size,
              "classes": classes, "seed": seed}
    output.record("data.make", config, {"num_shards": len(paths), "size_bytes": size})


def _check(out: Path, shards: int, images: int, image_size: int, classes: int, seed: int) -> None:
    """Every value, the open-file limit and the free disk space, before a file is written."""
    if shards < 1:
        raise ValueError(f"--shards {shards}: give at least 1 shard")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and shards > soft - SPARE_FILES:
        raise ValueError(f"--shards {shards}: the shards are written at once and this process may open "
                         f"{soft} files (ulimit -n); give at most {soft - SPARE_FILES} shards, or raise ulimit -n")
    if images < shards:
        raise ValueError(f"--images {images}: need at least one image per shard ({shards} shards)")
    if not 1 <= image_size <= MAX_IMAGE_SIZE:
        raise ValueError(f"--image-size {image_size}: use 1..{MAX_IMAGE_SIZE} pixels")
    if classes < 1:
        raise ValueError(f"--classes {classes}: give at least 1 label")
    if seed < 0:
        raise ValueError(f"--seed {seed}: give a seed >= 0")
    # Bytes of one record: the image, the Example's fields around it, and TFRecord's 16 B of framing.
    example = encode_example({"image/encoded": b"", "image/format": b"raw", "image/height": image_size,
                              "image/width": image_size, "image/channels": CHANNELS,
                              "image/class/label": classes - 1})
    needed = images * (image_size * image_size * CHANNELS + len(example) + 16 + 8)
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    free = shutil.disk_usage(parent).free
    if needed > DISK_SHARE * free:
        raise ValueError(f"the dataset needs about {needed / 1e9:.2f} GB but {parent} has {free / 1e9:.2f} GB "
                         f"free (at most {DISK_SHARE:.0%} of it is used): give fewer --images or a smaller "
                         f"--image-size")
