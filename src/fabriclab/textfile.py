"""Reading a user's text file: one helper, so a file that is not UTF-8 text is named, wherever it is read.

Every file a user hands the CLI as text (a cluster file, a kernel table, a config.json, a profile, a log, a
price table, a corpus manifest) is read with `read_text`: its bytes decoded as UTF-8 (a byte-order mark is
dropped, as spreadsheet programs write one), or a ValueError that names the file, where the first bad byte
is, and that the file must be UTF-8 text. Python's own error ("'utf-8' codec can't decode byte 0xff in
position 6") named neither the file nor what to do. An OSError (no such file, a folder) is the caller's to
word: each names its option.

Try it: `fabriclab calibrate kernels --table /bin/ls` (one error line naming the file).
"""

from __future__ import annotations

import os
from pathlib import Path


def read_text(path: str | os.PathLike, what: str = "") -> str:
    """The text of `path`; a ValueError naming it (`what`, e.g. "kernel table", goes before its name) when it
    is not UTF-8 text. OSError passes through."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        named = f"{what} {path}" if what else str(path)
        raise ValueError(f"{named} is not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}): give a text "
                         f"file saved as UTF-8") from None
