"""How fast Punctual writes: as fast as the API server admits, backing off when it says no.

Why it exists: Kubernetes protects itself with API Priority and Fairness, which queues
or refuses (429 Too Many Requests, with Retry-After) what it cannot take now. A fixed
client-side rate only makes a herd wait when the server has room; no limit at all
would answer a 429 or a 5xx with more of the same. So the writes follow the server:

* By default there is no client-side rate: the bounded pool of workers (`--workers`)
  bounds the requests in flight, and the server's own admission sets the pace.
* A 429 pauses every write until its Retry-After (1 s when it gives none); a 5xx or an
  unreachable server pauses them for a backoff that doubles with each failure in a row
  (0.25 s to 8 s) and resets at the first success. Nothing is retried here: a failed
  create stays in flight and its schedule is looked at again later (runtime.reconciling),
  so a refusal never turns into a storm of retries.
* A 429 also halves the writes allowed in flight (the window: unlimited until then,
  only the workers bound it), once per wave of refusals: only a write sent after the
  last change counts, since the others were sent into the old window. Each such write
  answered otherwise widens it by 1/window (about one more per round of answers, as
  TCP's congestion avoidance); past WINDOW_CEILING, or WINDOW_QUIET after the last
  429, it is unlimited again. Without it a pause ended with every worker writing at
  once, the server refused many of them again, and API Priority and Fairness doubled
  its Retry-After each time (bench/results-overload: 1 000 creates took 4 to 22 times
  as long as a plain client's on the same overloaded server).
* `--qps`/`--burst` add a token bucket (client-go's QPS and burst) as an optional cap.

The pause after a failure and the window after an answer are the pure functions
`backoff` and `window_after`, table-tested; the limiter sleeps on the monotonic clock,
which is injectable for tests.

What it must never do: retry a request itself, or let a write through during a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable

from punctual.clocks import Monotonic, monotonic

# A 5xx (or no answer) in a row pauses writes for BASE * 2**(n-1) seconds, at most MAX.
BACKOFF_BASE = 0.25
BACKOFF_MAX = 8.0
# A 429 without Retry-After pauses them this long; a Retry-After is honoured up to MAX.
TOO_MANY_DEFAULT = 1.0
RETRY_AFTER_MAX = 60.0
# Past this many writes in flight the window is lifted (the workers bound them anyway),
# and so it is this long after the last 429.
WINDOW_CEILING = 128
WINDOW_QUIET = 60.0


def backoff(status: int, retry_after: float | None, failures_in_a_row: int) -> float:
    """Seconds to pause every write after a response with `status` (0: unreachable),
    the `failures_in_a_row`-th such (counting this one); 0 for any other status."""
    if status == 429:
        wait = TOO_MANY_DEFAULT if retry_after is None else retry_after
        return min(max(wait, 0.0), RETRY_AFTER_MAX)
    if status == 0 or status >= 500:
        return min(BACKOFF_BASE * 2.0 ** max(failures_in_a_row - 1, 0), BACKOFF_MAX)
    return 0.0


def window_after(
    window: float | None,
    in_flight: int,
    status: int,
    *,
    fresh: bool,
    ceiling: int = WINDOW_CEILING,
) -> float | None:
    """The writes allowed in flight (its floor) after one is answered with `status` while
    `in_flight` were (this one included); None: no limit. `fresh`: the write was sent
    after the window last changed (an older one was sent into the old window: its
    refusal belongs to a wave already counted, its success says nothing of the new)."""
    if not fresh or status == 0 or status >= 500:
        return window
    if status == 429:
        current = float(in_flight) if window is None else min(window, float(in_flight))
        return max(1.0, float(int(current) // 2))
    if window is None:
        return None
    wider = window + 1.0 / window
    return None if wider > ceiling else wider


class RateLimiter:
    def __init__(
        self,
        qps: float | None = None,
        burst: int | None = None,
        *,
        monotonic: Monotonic = monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """No client-side rate when `qps` is None or 0; else a bucket of `burst` (None or
        0: twice qps) refilled at `qps`."""
        if qps:
            burst = burst or max(1, int(2 * qps))  # unset or 0: twice qps
            if not (math.isfinite(qps) and qps > 0) or burst < 1:
                raise ValueError(f"need qps > 0 and burst >= 1, got {qps} and {burst}")
        self.qps = float(qps) if qps else None
        self.burst = burst if qps else None
        self._monotonic = monotonic
        self._sleep = sleep
        self._tokens = float(self.burst or 0)
        self._updated = monotonic()
        self._paused_until = float("-inf")
        self._failures = 0
        self.paused_seconds = 0.0  # total, for metrics and the benchmark
        self.window: float | None = None  # writes allowed in flight (floor); None: no limit
        self.in_flight = 0
        self._changed_at = float("-inf")  # when the window last changed
        self._refused_at = float("-inf")  # the last 429
        self._slot_freed = asyncio.Condition()

    def _refill(self) -> None:
        assert self.qps is not None and self.burst is not None
        now = self._monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    async def acquire(self) -> None:
        """Wait out a pause the server asked for, then take a token if there is a cap."""
        while (wait := self._paused_until - self._monotonic()) > 0:
            await self._sleep(wait)
        if self.qps is None:
            return
        self._refill()
        self._tokens -= 1
        if self._tokens < 0:
            await self._sleep(-self._tokens / self.qps)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """One write in flight, within the window; yields when it was sent (for `answered`)."""
        async with self._slot_freed:
            await self._slot_freed.wait_for(
                lambda: self.window is None or self.in_flight < int(self.window)
            )
            self.in_flight += 1
        try:
            yield self._monotonic()
        finally:
            self.in_flight -= 1
            async with self._slot_freed:
                self._slot_freed.notify_all()

    def answered(
        self, status: int, retry_after: float | None = None, *, sent_at: float | None = None
    ) -> None:
        """What the server answered a write (0: no answer) sent at `sent_at` (None: now,
        outside a slot): a 429 or 5xx pauses writes, and the window follows (see above)."""
        now = self._monotonic()
        if status == 429:
            self._refused_at = now
        fresh = sent_at is None or sent_at > self._changed_at
        window = window_after(self.window, max(self.in_flight, 1), status, fresh=fresh)
        if window is not None and now - self._refused_at > WINDOW_QUIET:
            window = None  # no 429 for a while: the server has room again
        if window != self.window:
            if window is None or self.window is None or int(window) != int(self.window):
                self._changed_at = now
            self.window = window
        if status == 429 or status == 0 or status >= 500:
            self._failures += 1
            pause = backoff(status, retry_after, self._failures)
            until = self._monotonic() + pause
            if until > self._paused_until:
                self.paused_seconds += until - max(self._paused_until, self._monotonic())
                self._paused_until = until
        else:
            self._failures = 0
