"""Freed memory handed back once a minute: the trim is called, measured, and optional."""

from __future__ import annotations

import asyncio
from pathlib import Path

from punctual.runtime.trimming import Trimmer, glibc_in_use, glibc_trim, resident_bytes


class Minutes:
    """A Sleeper that lets `count` waits pass, then sets `stop`."""

    def __init__(self, count: int, stop: asyncio.Event) -> None:
        self.count = count
        self.stop = stop
        self.waited: list[float | None] = []

    async def wait(self, *events: asyncio.Event, timeout: float | None) -> None:
        self.waited.append(timeout)
        self.count -= 1
        if self.count <= 0:
            self.stop.set()

    async def sleep(self, seconds: float) -> None:
        await self.wait(timeout=seconds)


async def test_each_interval_trims_once_and_counts_what_resident_memory_fell_by() -> None:
    stop = asyncio.Event()
    resident = [300, 200, 200, 200, 150, 100]  # before and after each of three trims
    trims: list[int] = []
    trimmer = Trimmer(
        trim=lambda: trims.append(1),
        resident=lambda: resident.pop(0),
        sleeper=Minutes(4, stop),
        interval=60.0,
    )
    await trimmer.run(stop)
    assert len(trims) == 3  # the fourth wait ended with the stop: no trim after it
    assert trimmer.returned == 100 + 0 + 50


async def test_without_a_trim_the_trimmer_only_waits() -> None:
    stop = asyncio.Event()
    sleeper = Minutes(3, stop)
    trimmer = Trimmer(trim=None, resident=lambda: 1 // 0, sleeper=sleeper)  # never read
    await trimmer.run(stop)
    assert sleeper.waited == [60.0, 60.0, 60.0]
    assert trimmer.trim_once() == 0


def test_glibc_trim_returns_freed_pages_here() -> None:
    trim = glibc_trim()
    assert trim is not None, "this machine's Python runs on glibc"
    held = [bytearray(64 * 1024) for _ in range(2000)]  # 128 MiB from malloc's heap
    del held[::2]  # freed, but between live blocks: the heap cannot shrink by itself
    before = resident_bytes()
    trim()
    assert resident_bytes() < before - 32 * 2**20
    del held


def test_glibc_in_use_follows_what_is_allocated_and_freed() -> None:
    in_use = glibc_in_use()
    assert in_use is not None, "this machine's Python runs on glibc 2.33 or later"
    before = in_use()
    held = [bytearray(4096) for _ in range(8192)]  # 32 MiB through malloc
    grown = in_use()
    del held
    assert grown - before >= 32 * 2**20
    assert in_use() < grown - 24 * 2**20


def test_the_image_runs_every_object_in_the_c_allocator() -> None:
    """PYTHONMALLOC=malloc in the image, so that the trims reach every freed page (a soak
    on pymalloc kept arenas a trim cannot reach: bench/results-soak/malloc-ab/)."""
    dockerfile = (Path(__file__).parents[2] / "operator" / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "PYTHONMALLOC=malloc" in final_stage
