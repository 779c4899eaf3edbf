"""The report half of the bench's one pipeline: raw result JSON in, reports out.

Why it exists: the bench measures in bench/run.py and bench/scale.py, which write raw
JSON (`<folder>/raw/*.json`) and render nothing themselves; everything a reader sees is
made here from those files alone, so that every committed results folder can be
rendered again, and its numbers checked, without running anything. `render(folder)` is
the one function that writes reports, and what it writes depends on the raw files:

- bench/scale.py's rows (sustained load, start-up): results.md (rendering.scale);
- bench/ramp.py's ramp (the plain client and Punctual side by side): results.md
  (rendering.ramp);
- bench/run.py's scenarios: results.md with the scale-out targets table
  (rendering.ticks, rendering.targets) and skew.png when matplotlib is installed; and
  shards.md when there are shard rows (rendering.shards).

What it must never do: measure, start or touch a process or a cluster, import
`punctual`, write anything but those reports into the folder it is given (never a raw
file), or do anything at import time.
"""

from __future__ import annotations

from pathlib import Path

from rendering import ramp, scale, shards, ticks


def render(folder: Path) -> list[Path]:
    """Write `folder`'s reports from `folder/raw/*.json`; the files written, [] if no results."""
    written: list[Path] = []
    if ramp.has_rows(folder):
        written.append(_write(folder / "results.md", ramp.markdown(folder)))
        return written
    if scale.has_rows(folder):
        written.append(_write(folder / "results.md", scale.markdown(folder)))
        return written
    text = ticks.markdown(folder)
    if text is None:
        return written
    written.append(_write(folder / "results.md", text))
    if ticks.plot(ticks.load(folder)[0], folder / "skew.png"):
        written.append(folder / "skew.png")
    if shards.has_rows(folder):
        written.append(_write(folder / "shards.md", shards.markdown(folder)))
    return written


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
