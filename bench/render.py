"""Rebuild the reports of results folders from their raw JSON alone.

    python bench/render.py                          # bench/results
    python bench/render.py bench/results-scaleout bench/results-scale

Why it exists: measuring (bench/run.py, bench/scale.py) writes raw JSON and then calls
the same renderer; this is that renderer's entry point on its own, to rebuild a
folder's results.md (and skew.png, shards.md) after the renderer changed, or to check
a committed report's numbers against its raw files. See rendering/__init__.py for what
is written where.

What it must never do: measure, start anything, or write anything but the reports that
rendering.render writes into the folders it is given.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rendering import render

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or [HERE / "results"]
    status = 0
    for folder in folders:
        written = render(folder)
        if not written:
            print(f"no results in {folder / 'raw'}", file=sys.stderr)
            status = 1
        for path in written:
            print(path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
