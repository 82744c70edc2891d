"""Record the golden set: run every command of `commands.py` and write `data/<name>.json`.

    python tests/golden/record.py                 # re-record every command
    python tests/golden/record.py NAME ...        # only these
    python tests/golden/record.py --twice         # run each command twice: what varies must be dropped

RUN IT ONLY ON A COMMIT WHOSE ANSWERS ARE KNOWN GOOD. The files it writes are what `test_golden.py` holds
every later version of the code to; recording from a broken tree makes the broken answers the reference.
After a change that is meant to alter answers, re-record only the commands concerned, and review the diff of
`data/` like code.

How the stored set was made: from a frozen worktree of commit ed96716 (before the package restructure), with
the worktree's sources first on the path and the results store off,

    git worktree add --detach /tmp/golden-base ed96716
    cd /work/main     # this repository: commands.py, the shipped logs in examples/, data/ written here
    PYTHONPATH=/tmp/golden-base/src python tests/golden/record.py --twice
    PYTHONPATH=/tmp/golden-base/src python tests/golden/record.py

(`python -c "import fabriclab; print(fabriclab.__file__)"` with the same PYTHONPATH names the worktree; the
script prints the fabriclab it runs and refuses nothing, so check it.) `--twice` runs every command twice
in separate folders and fails if anything differs between the two runs that normalisation keeps; it
prints what was dropped, so the drop rules can be reviewed. Each data file holds the command's name and
argv (placeholders unfilled), the revision it was recorded from and the normalised output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


sys.path.insert(0, str(HERE))  # harness and commands sit beside this file
import commands  # noqa: E402
import harness  # noqa: E402


def fabriclab_under_test() -> tuple[str, str | None]:
    """The fabriclab package the subprocesses import, and the git revision of its checkout."""
    where = subprocess.run([sys.executable, "-c", "import fabriclab, os; print(os.path.dirname(fabriclab.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                           capture_output=True, text=True)
    revision = rev.stdout.strip() if rev.returncode == 0 else None
    if revision and dirty.stdout.strip():
        revision += " (with local changes)"
    return where, revision


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these commands (default: all)")
    parser.add_argument("--twice", action="store_true",
                        help="run each command twice and check that only dropped keys differ; writes nothing")
    args = parser.parse_args()

    known = {c.name: c for c in commands.COMMANDS}
    if len(known) != len(commands.COMMANDS):
        dupes = [n for n, k in Counter(c.name for c in commands.COMMANDS).items() if k > 1]
        raise SystemExit(f"duplicate command names: {dupes}")
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise SystemExit(f"unknown command(s): {', '.join(unknown)}")
    chosen = [known[n] for n in args.names] if args.names else list(commands.COMMANDS)

    where, revision = fabriclab_under_test()
    print(f"fabriclab under test: {where} (revision {revision})", flush=True)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="fabriclab-golden-") as tmp:
        tmp = Path(tmp)
        cluster = harness.make_cluster(tmp / "_cluster")
        for command in chosen:
            raw = harness.run_raw(command, tmp / command.name / "1", cluster)
            dropped: list[str] = []
            normalised = harness.normalise(command, raw, tmp / command.name / "1", dropped)
            if args.twice:
                raw2 = harness.run_raw(command, tmp / command.name / "2", cluster)
                again = harness.normalise(command, raw2, tmp / command.name / "2")
                varying = harness.compare(raw, raw2, exact=True)
                kept_varying = harness.compare(normalised, again, exact=True)
                bad += bool(kept_varying)
                status = "NOT DETERMINISTIC" if kept_varying else "ok"
                print(f"{command.name}: {status}; {len(varying)} raw differences between the runs; "
                      f"dropped: {_summary(dropped)}")
                for line in kept_varying[:10]:
                    print(f"    kept but varies: {line}")
                for line in varying:
                    print(f"    varies (raw): {line}")
                continue
            doc = {"name": command.name, "argv": list(command.argv), "recorded_from": revision, **normalised}
            harness.DATA.mkdir(parents=True, exist_ok=True)
            harness.data_path(command.name).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
            print(f"{command.name}: recorded (dropped: {_summary(dropped)})", flush=True)
    if args.twice:
        print(f"{len(chosen) - bad} of {len(chosen)} commands deterministic after normalisation")
    return 1 if bad else 0


def _summary(dropped: list[str]) -> str:
    """`record.results.rows[*].wall_s x12, ...`: dropped paths with list indices folded."""
    import re

    folded = Counter(re.sub(r"\[\d+\]", "[*]", p) for p in dropped)
    return ", ".join(f"{p}" + (f" x{n}" if n > 1 else "") for p, n in folded.items()) or "nothing"


if __name__ == "__main__":
    sys.exit(main())
