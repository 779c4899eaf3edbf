"""The client-side token bucket, on a fake monotonic clock with a fake sleep.

The fake sleep records what it was asked and advances the fake clock by as much, so
"the tenth request went out at 0.5 s" is asserted in no real time.
"""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest

from punctual.kube.ratelimiting import RateLimiter, backoff, window_after


class FakeTime:
    def __init__(self, *, sleeping_advances_the_clock: bool = True) -> None:
        self.now = 1000.0  # an arbitrary monotonic reading
        self.sleeps: list[float] = []
        self._advance = sleeping_advances_the_clock

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self._advance:
            self.now += seconds
        await asyncio.sleep(0)


def limiter(time: FakeTime, *, qps: float, burst: int) -> RateLimiter:
    return RateLimiter(qps, burst, monotonic=time.clock, sleep=time.sleep)


async def times_of(limiter: RateLimiter, time: FakeTime, count: int) -> list[float]:
    """Acquire `count` times one after another; when (since start) each one went out."""
    start = time.now
    out = []
    for _ in range(count):
        await limiter.acquire()
        out.append(round(time.now - start, 9))
    return out


async def test_a_burst_goes_through_without_sleeping() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=10, burst=5)
    assert await times_of(bucket, time, 5) == [0.0] * 5
    assert time.sleeps == []


async def test_after_the_burst_requests_are_spaced_one_over_qps_apart() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=10, burst=5)
    sent = await times_of(bucket, time, 10)
    assert sent == [0.0] * 5 + [0.1, 0.2, 0.3, 0.4, 0.5]
    assert time.sleeps == pytest.approx([0.1] * 5)


async def test_a_long_run_averages_to_qps() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=50, burst=10)
    sent = await times_of(bucket, time, 100)
    # The burst is free; the other 90 take 90 / 50 s.
    assert sent[-1] == pytest.approx(90 / 50)
    gaps = [b - a for a, b in itertools.pairwise(sent[10:])]
    assert gaps == pytest.approx([1 / 50] * len(gaps))


async def test_concurrent_callers_at_one_instant_are_queued_one_over_qps_apart() -> None:
    # All callers arrive before any sleep ends (the clock does not move meanwhile):
    # each waits for its own turn, not all for the same one.
    time = FakeTime(sleeping_advances_the_clock=False)
    bucket = limiter(time, qps=4, burst=2)
    await asyncio.gather(*(bucket.acquire() for _ in range(6)))
    assert sorted(time.sleeps) == pytest.approx([0.25, 0.5, 0.75, 1.0])


async def test_an_idle_bucket_refills_but_never_beyond_the_burst() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=10, burst=3)
    await times_of(bucket, time, 3)
    time.now += 3600  # an idle hour is worth 3 tokens, not 36000
    time.sleeps.clear()
    sent = await times_of(bucket, time, 4)
    assert sent == [0.0, 0.0, 0.0, 0.1]
    assert time.sleeps == pytest.approx([0.1])


async def test_a_partly_refilled_bucket_waits_only_for_the_missing_fraction() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=10, burst=3)
    await times_of(bucket, time, 3)
    time.now += 0.25  # 2.5 tokens back
    time.sleeps.clear()
    sent = await times_of(bucket, time, 3)
    assert sent == [0.0, 0.0, 0.05]
    assert time.sleeps == pytest.approx([0.05])


async def test_requests_at_exactly_qps_never_wait() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=5, burst=1)
    for _ in range(50):
        await bucket.acquire()
        time.now += 0.2
    assert time.sleeps == []


async def test_the_bucket_starts_full_when_it_is_made() -> None:
    time = FakeTime()
    bucket = limiter(time, qps=1, burst=2)
    time.now += 100
    assert await times_of(bucket, time, 3) == [0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("qps", "burst"),
    [(-1.0, 10), (10, -3)],
    ids=["negative qps", "negative burst"],
)
def test_invalid_qps_or_burst_raise(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps"):
        RateLimiter(qps, burst, monotonic=lambda: 0.0)


def test_a_qps_that_is_not_a_number_raises() -> None:
    with pytest.raises(ValueError, match="qps"):
        RateLimiter(math.nan, 10, monotonic=lambda: 0.0)


# -- following the API server: no cap by default, pauses on 429 and 5xx -------------------


async def test_without_a_cap_nothing_waits() -> None:
    time = FakeTime()
    uncapped = RateLimiter(monotonic=time.clock, sleep=time.sleep)
    assert await times_of(uncapped, time, 1000) == [0.0] * 1000
    assert RateLimiter(0, 0, monotonic=time.clock).qps is None  # 0: no cap (the chart's)


@pytest.mark.parametrize(
    ("status", "retry_after", "in_a_row", "pause"),
    [
        (201, None, 0, 0.0),
        (409, None, 0, 0.0),  # a conflict is an answer, not overload
        (429, None, 1, 1.0),
        (429, 3.0, 1, 3.0),  # Retry-After honoured
        (429, 3600.0, 1, 60.0),  # ...up to a minute
        (503, None, 1, 0.25),
        (500, None, 2, 0.5),
        (0, None, 3, 1.0),  # unreachable
        (504, None, 10, 8.0),  # capped
    ],
)
def test_backoff(status: int, retry_after: float | None, in_a_row: int, pause: float) -> None:
    assert backoff(status, retry_after, in_a_row) == pause


async def test_a_429_pauses_every_write_until_its_retry_after_then_no_more() -> None:
    time = FakeTime()
    limiter = RateLimiter(monotonic=time.clock, sleep=time.sleep)
    limiter.answered(429, 2.0)
    assert await times_of(limiter, time, 3) == [2.0, 2.0, 2.0]  # one pause, shared
    limiter.answered(201)
    assert await times_of(limiter, time, 1) == [0.0]


async def test_5xx_in_a_row_back_off_exponentially_and_a_success_resets() -> None:
    time = FakeTime()
    limiter = RateLimiter(monotonic=time.clock, sleep=time.sleep)
    waits = []
    for _ in range(4):
        limiter.answered(503)
        waits += await times_of(limiter, time, 1)
    assert waits == [0.25, 0.5, 1.0, 2.0]
    limiter.answered(200)
    limiter.answered(503)
    assert await times_of(limiter, time, 1) == [0.25]
    assert limiter.paused_seconds == pytest.approx(4.0)


async def test_a_cap_and_a_pause_add_up() -> None:
    time = FakeTime()
    capped = RateLimiter(10, 1, monotonic=time.clock, sleep=time.sleep)
    capped.answered(429, 1.0)
    assert await times_of(capped, time, 2) == [1.0, 1.1]


# -- the window: writes in flight after a 429 ------------------------------------------


@pytest.mark.parametrize(
    ("window", "in_flight", "status", "fresh", "after"),
    [
        (None, 128, 201, True, None),  # never refused: no limit
        (None, 128, 429, True, 64.0),  # the first refusal halves what was in flight
        (None, 1, 429, True, 1.0),  # never below one
        (64.0, 64, 429, False, 64.0),  # sent into the old window: its wave was counted
        (64.0, 40, 429, True, 20.0),  # halves what is in flight, if fewer than the window
        (33.0, 33, 429, True, 16.0),  # whole writes
        (32.0, 32, 201, True, 32.03125),  # each answer widens it by 1/window
        (32.0, 32, 201, False, 32.0),  # ...when it was sent into this window
        (128.0, 100, 201, True, None),  # past the ceiling: no limit again
        (32.0, 32, 503, True, 32.0),  # a 5xx pauses (backoff) but leaves the window
        (32.0, 32, 409, True, 32.03125),  # a conflict is an answer: the server had room
    ],
)
def test_window_after(
    window: float | None, in_flight: int, status: int, fresh: bool, after: float | None
) -> None:
    assert window_after(window, in_flight, status, fresh=fresh) == after


async def test_after_a_429_only_the_window_goes_out_and_answers_widen_it_slowly() -> None:
    time = FakeTime()
    limiter = RateLimiter(monotonic=time.clock, sleep=time.sleep)
    release = asyncio.Event()
    started = 0

    async def write() -> None:
        nonlocal started
        async with limiter.slot() as sent_at:
            started += 1
            await release.wait()
            limiter.answered(201, sent_at=sent_at)

    limiter.in_flight = 9  # ten writes in flight, one of them refused: the window is 5
    async with limiter.slot() as first:
        limiter.answered(429, 0.0, sent_at=first)
    limiter.in_flight = 0
    assert limiter.window == 5.0
    time.now += 1
    writers = [asyncio.create_task(write()) for _ in range(8)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert started == 5 and limiter.in_flight == 5  # the others wait for a slot
    release.set()
    await asyncio.gather(*writers)
    assert started == 8
    assert limiter.window is not None and 6.0 <= limiter.window < 7.0  # about one more


async def test_a_wave_of_refusals_halves_the_window_once() -> None:
    time = FakeTime()
    limiter = RateLimiter(monotonic=time.clock, sleep=time.sleep)
    sent = time.now
    time.now += 0.1
    limiter.in_flight = 100  # a herd's writes, all sent before any answer
    limiter.answered(429, 1.0, sent_at=sent)
    assert limiter.window == 50.0
    for _ in range(30):  # the rest of the same wave
        limiter.answered(429, 1.0, sent_at=sent)
    assert limiter.window == 50.0
    time.now += 2
    limiter.in_flight = 50
    limiter.answered(429, 1.0, sent_at=time.now - 1)  # sent after the halving: a new wave
    assert limiter.window == 25.0


async def test_a_minute_without_429s_lifts_the_window() -> None:
    time = FakeTime()
    limiter = RateLimiter(monotonic=time.clock, sleep=time.sleep)
    limiter.in_flight = 8
    limiter.answered(429, 1.0)
    assert limiter.window == 4.0
    time.now += 30
    limiter.answered(201)
    assert limiter.window is not None
    time.now += 31
    limiter.answered(201)
    assert limiter.window is None
