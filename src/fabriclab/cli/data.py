"""`fabriclab data make`: write a synthetic image dataset as TFRecord shards, like seed 000's ImageNet.

Seed 000 converted ImageNet to TFRecord and stored it in 1024 files; `make` writes random raw images
with uniform labels in that layout (`train-00000-of-01024`, ...), for `fabriclab train --data DIR`,
whose ranks then read their own shards in parallel (S-Caffe's parallel readers).

Try it: `fabriclab data make --out /tmp/imagenet-synth --shards 16 --images 1024 --image-size 32`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabriclab.cli.common import console, user_errors
from fabriclab.runtime.data import NUM_CLASSES, make_dataset

app = typer.Typer(help="Datasets for `fabriclab train`: synthetic images as TFRecord shards.",
                  no_args_is_help=True)


def register(main_app: typer.Typer) -> None:
    """Add the `data` command group (with `make`) to `main_app`."""
    main_app.add_typer(app, name="data")


@app.command("make")
@user_errors
def make(
    out: Annotated[Path, typer.Option(help="Folder to write the shards into (created if missing).",
                                      file_okay=False)],
    shards: Annotated[int, typer.Option(help="Number of shard files (seed 000: 1024).")] = 1024,
    images: Annotated[int, typer.Option(help="Images in all (spread round-robin over the shards).")] = 10240,
    image_size: Annotated[int, typer.Option(help="Image side in pixels.")] = 32,
    classes: Annotated[int, typer.Option(help="Number of labels.")] = NUM_CLASSES,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Write `--images` random images into `--shards` TFRecord files named train-NNNNN-of-NNNNN."""
    paths = make_dataset(out, num_shards=shards, num_images=images, image_size=image_size,
                         num_classes=classes, seed=seed)
    size = sum(p.stat().st_size for p in paths)
    console.print(f"wrote {images} images of {image_size}x{image_size} in {len(paths)} shards "
                  f"({size / 1e6:.1f} MB) to {out}", markup=False, highlight=False)
