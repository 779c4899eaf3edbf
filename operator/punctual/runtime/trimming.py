"""Freed memory handed back to the operating system, once a minute.

Why it exists: a burst of work (the relist after an API server restart, the writes a
takeover sends, the pages of a long list) allocates and frees tens of megabytes. The
Python heap's blocks fall back to where they were, but glibc keeps the freed pages in
its heap, so resident memory steps up at each burst's peak and never comes down (a
30-minute soak: 133 to 158 MiB and 136 to 168 MiB across the first API server restart,
the heap's blocks flat at 0.59-0.62 M; bench/results-soak/at-5a459cf-30min.md).
`malloc_trim(0)` returns the free pages; it takes well under 10 ms on an 800 MiB heap,
and a pass whose memory was never freed finds nothing to return. In the 60-minute soak
it returned 8-22 MiB at a time after bursts (bench/results-soak/at-1a0a54e.md). What it
cannot return is a page that still holds one live block: resident memory still drifted
there (+25-28 % over the hour, the heap's blocks within 1 %). Most of that drift was
the interpreter's own allocator (pymalloc), which a trim cannot reach: pymalloc takes
1 MiB arenas from the system and gives one back only once every object in it is freed,
so the objects a burst leaves alive (an index entry, a string) pin its arenas. A soak
replica's anonymous mappings grew from 64.9 to 73.0 MiB at one API server restart and
stayed, while its C heap was trimmed back (bench/results-soak/malloc-ab/). So the image
runs with PYTHONMALLOC=malloc: every object in the C allocator, whose free pages this
trims whatever lives around them.

What it must never do: touch a Python object, fail where glibc is absent (musl, macOS:
there it does nothing), or read any clock but the injected sleeper's.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable
from typing import Any

from punctual.clocks import EventLoopSleeper, Sleeper

logger = logging.getLogger(__name__)

INTERVAL = 60.0  # seconds between trims
WORTH_A_LINE = 8 * 2**20  # bytes returned at once that deserve an info log line


def resident_bytes() -> int:
    """This process's resident memory (0 where /proc is absent)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _libc(symbol: str) -> Any | None:
    """A function of the C library by name, or None where it has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), symbol)
    except (OSError, AttributeError):
        return None


def glibc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None where the C library has none."""
    trim = _libc("malloc_trim")
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def glibc_in_use() -> Callable[[], int] | None:
    """The bytes the C allocator holds allocated now (glibc's mallinfo2: in its arenas
    and mapped one by one), or None where the C library has no mallinfo2 (glibc before
    2.33, musl, macOS). With PYTHONMALLOC=malloc, as the image runs, every Python object
    is in it: the live heap, which falls when objects are freed, where resident memory
    keeps what the allocator could not give back."""
    mallinfo2 = _libc("mallinfo2")
    if mallinfo2 is None:
        return None
    mallinfo2.argtypes = []
    mallinfo2.restype = _MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)

    return in_use


class Trimmer:
    def __init__(
        self,
        *,
        trim: Callable[[], object] | None,
        resident: Callable[[], int] = resident_bytes,
        sleeper: Sleeper | None = None,
        interval: float = INTERVAL,
    ) -> None:
        self._trim = trim  # None: no malloc_trim in this C library (see glibc_trim)
        self._resident = resident
        self._sleeper = sleeper or EventLoopSleeper()
        self.interval = interval
        self.returned = 0  # bytes handed back so far, for tests and logs

    async def run(self, stop: asyncio.Event) -> None:
        """Trim every `interval` until `stop`; where there is no trim, only wait."""
        while not stop.is_set():
            await self._sleeper.wait(stop, timeout=self.interval)
            if stop.is_set() or self._trim is None:
                continue
            self.trim_once()

    def trim_once(self) -> int:
        """Trim now; the bytes resident memory fell by (0 if it did not)."""
        if self._trim is None:
            return 0
        before = self._resident()
        self._trim()
        after = self._resident()
        returned = max(0, before - after)
        self.returned += returned
        if returned >= WORTH_A_LINE:
            logger.info(
                "returned %.1f MiB of freed memory to the system (resident %.1f MiB)",
                returned / 2**20,
                after / 2**20,
            )
        return returned
