"""The one scheduler loop: a heap of wake-up times, a bounded pool of workers, fairness.

Why it exists: a leader must look at each schedule when its next tick is due (and when
the schedule or one of its Jobs changes), never two workers on the same schedule at
once, never more than `workers` at a time, and without one namespace with thousands
of schedules starving the others. This module owns only that timing and fairness; what
to do with a schedule is the `process` callback's business.

* Wake-up times are API-server instants; the loop sleeps against `clock.now()`, which
  is the estimated API server clock: it waits, through its `Sleeper`, the seconds from
  `clock.now()` to the earliest wake-up, and reads the clock again whenever it wakes
  (the estimate may have moved meanwhile). The Sleeper is asyncio's in production and
  simulated time in the tests, which assert "processed at T, not before" exactly.
* Woken ahead (`ahead`, `punctual run --decide-ahead`): a timer whose instant is
  within `ahead` of `clock.now()` is served now, and `woken_for(key)` tells its pass the
  instant, so that it decides as of that instant and sends its writes only once the
  clock reaches it (runtime.reconciling). At an instant many schedules share, the
  passes' deciding is then done before it, and only their requests are left at it.
* A key that is notified while it is being processed is processed again afterwards,
  so no change is lost and no schedule is processed concurrently with itself.
* Keys whose wake-up time came wait in one lane, served first, earliest first: a tick
  due now is never behind the changes that were notified before it (at a new leader's
  start, 100 000 of them in one namespace: the due tick used to wait for every one).
* The other ready keys (notified: a change, a new leader's look at everything) wait in
  one queue per namespace; workers take from the namespaces in turn (round-robin).
* Routine writes (`admit`, `postpone`: a status that waits on no tick, such as the
  first claim of a schedule whose first tick is a year away) take at most
  `routine_slots` workers at a time. One that finds them all taken is postponed to a
  lane of its own, served oldest first as slots free up: after the due lane, before
  the ready keys. So 100 000 first claims at start-up never keep a due tick waiting
  for a worker, and a new leader's look at every schedule (100 000 ready keys, a
  minute of passes) does not hold every first claim back until it ends. (The restart
  on 100 000 wrote 36 first claims in the minute after its list, bench/results-scale;
  the routine lane waiting for the ready queues to empty is the cause this loop
  shows, not measured at that size since. At 20 000 the sweep is short and both
  orders wrote 220-240 a second: bench/results-restart-claims.)

What it must never do: call the API server itself, or block on one schedule.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from punctual.clocks import Clock, EventLoopSleeper, Sleeper

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Process = Callable[[Key], Awaitable[datetime | None]]


class SchedulerLoop:
    def __init__(
        self,
        process: Process,
        *,
        clock: Clock,
        workers: int = 128,
        routine_slots: int = 16,
        sleeper: Sleeper | None = None,
        ahead: timedelta = timedelta(0),
    ) -> None:
        self._process = process
        self._ahead = ahead
        self._woken_for: dict[Key, datetime] = {}  # timers served ahead of their instant
        self._exact: set[Key] = set()  # keys never served ahead (decide_ahead)
        self._held: list[tuple[datetime, int, Key]] = []  # their timers within `ahead`
        self._clock = clock
        self._sleeper = sleeper or EventLoopSleeper()
        self._workers = workers
        self._routine_slots = max(1, min(routine_slots, workers))
        self._routine: OrderedDict[Key, None] = OrderedDict()  # postponed, oldest first
        self._routine_running: set[Key] = set()  # passes that hold a routine slot
        self._heap: list[tuple[datetime, int, Key]] = []
        self._wake: dict[Key, datetime] = {}  # the live heap entry per key
        self._seq = itertools.count()
        self._ready: OrderedDict[str, deque[Key]] = OrderedDict()
        self._queued: set[Key] = set()  # in a ready queue (an entry not in it is stale)
        self._due: deque[Key] = deque()  # woken by their timer, served before _ready
        self._due_queued: set[Key] = set()
        self._running: set[Key] = set()
        self._dirty: set[Key] = set()
        self._dirty_due: set[Key] = set()  # woken by their timer while being processed
        self._dirty_by: dict[Key, datetime] = {}  # wake_by while being processed
        self._kick = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.enabled = True

    # -- inputs ------------------------------------------------------------------------

    def notify(self, key: Key) -> None:
        """Look at `key` as soon as a worker is free."""
        if key in self._running:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.setdefault(key[0], deque()).append(key)
        self._kick.set()

    def notify_in_order(self, keys: list[Key]) -> None:
        """Look at every one of `keys`, in this order, before anything else that waited:
        the ready queues are rebuilt from them. (While a replica does not lead, its loop
        queues every change it is told of; a new leader must not serve 100 000 of those
        in the order they came before the schedules due now.) A key being processed is
        processed again afterwards, as with `notify`."""
        self._ready.clear()
        self._queued.clear()
        for key in keys:
            self.notify(key)

    def wake_at(self, key: Key, instant: datetime | None) -> None:
        """Look at `key` at `instant` (server time); None cancels its timer."""
        if instant is None:
            self._wake.pop(key, None)
            return
        if self._wake.get(key) == instant:
            return  # its live entry is in the heap: a pass that keeps its timer adds none
        self._wake[key] = instant
        heapq.heappush(self._heap, (instant, next(self._seq), key))
        self._kick.set()

    def wake_by(self, key: Key, instant: datetime) -> None:
        """Look at `key` by `instant` at the latest: its timer moves earlier, never later.
        A key being processed gets it once its pass has set its own timer."""
        if key in self._running:
            self._dirty_by[key] = min(instant, self._dirty_by.get(key, instant))
            return
        current = self._wake.get(key)
        if current is None or instant < current:
            self.wake_at(key, instant)

    def forget(self, key: Key) -> None:
        self._wake.pop(key, None)
        self._routine.pop(key, None)
        self._woken_for.pop(key, None)
        self._exact.discard(key)

    def decide_ahead(self, key: Key, allowed: bool) -> None:
        """Whether `key`'s timers may be served ahead of their instant (the pass says:
        runtime.reconciling.decidable_ahead); until told, they may."""
        if allowed:
            self._exact.discard(key)
        else:
            self._exact.add(key)

    def woken_for(self, key: Key) -> datetime | None:
        """The instant of the timer the pass over `key` (running now) was woken ahead of,
        if it was: the pass decides as of it, and writes nothing before it."""
        return self._woken_for.get(key)

    def admit(self, key: Key) -> bool:
        """Whether the pass over `key` (running now) may make its routine write: it was
        dispatched from the routine lane, or a routine slot is free and nothing was
        postponed before it. The slot is held until the pass ends."""
        if key in self._routine_running:
            return True
        if self._routine or len(self._routine_running) >= self._routine_slots:
            return False
        self._routine_running.add(key)
        return True

    def postpone(self, key: Key) -> None:
        """Do `key`'s routine write later, when a routine slot is free and no ready key
        waits (the pass decides again then)."""
        self._routine[key] = None
        self._kick.set()

    @property
    def timers(self) -> int:
        """Entries in the timer heaps, superseded ones included (dropped as they come due)."""
        return len(self._heap) + len(self._held)

    @property
    def pending(self) -> int:
        return len(self._queued | self._due_queued) + len(self._running)

    @property
    def postponed(self) -> int:
        """Schedules whose routine write waits for a slot."""
        return len(self._routine)

    # -- the loop ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._kick.clear()
            self._promote_due()
            if self.enabled:
                self._dispatch()
            await self._sleeper.wait(self._kick, stop, timeout=self._seconds_to_next())
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _promote_due(self) -> None:
        now = self._clock.now()
        while self._held and self._held[0][0] <= now:  # exact timers, now due
            instant, _, key = heapq.heappop(self._held)
            if self._wake.get(key) == instant:
                del self._wake[key]
                self._notify_due(key)
        while self._heap and self._heap[0][0] <= now + self._ahead:
            entry = heapq.heappop(self._heap)
            instant, _, key = entry
            if self._wake.get(key) != instant:
                continue  # superseded
            if instant > now and key in self._exact:
                heapq.heappush(self._held, entry)  # served at its instant, not ahead
                continue
            del self._wake[key]
            if instant > now:
                self._woken_for[key] = instant
            self._notify_due(key)

    def _notify_due(self, key: Key) -> None:
        """Like `notify`, in the lane served first. (A copy of the key may also wait in a
        ready queue: whichever is dispatched first takes it, the other is then stale.)"""
        if key in self._running:
            self._dirty_due.add(key)
        elif key not in self._due_queued:
            self._due_queued.add(key)
            self._due.append(key)
        self._kick.set()

    def _seconds_until(self, instant: datetime) -> float:
        return (instant - self._clock.now()).total_seconds()

    def _seconds_to_next(self) -> float | None:
        for heap in (self._heap, self._held):
            while heap and self._wake.get(heap[0][2]) != heap[0][0]:
                heapq.heappop(heap)  # superseded entries
        nexts = [self._heap[0][0] - self._ahead] if self._heap else []
        nexts += [self._held[0][0]] if self._held else []
        if not nexts:
            return None
        return max(0.0, (min(nexts) - self._clock.now()).total_seconds())

    def _dispatch(self) -> None:
        """Free workers to the due lane, then the postponed routine writes (their
        slots), then the ready keys (the namespaces in turn)."""
        self._dispatch_due()
        self._dispatch_routine()
        self._dispatch_ready()

    def _dispatch_due(self) -> None:
        while len(self._running) < self._workers and self._due:
            key = self._due.popleft()
            if key not in self._due_queued or key in self._running:
                continue  # stale: the key went through the other lane
            self._start_queued(key)

    def _dispatch_ready(self) -> None:
        while len(self._running) < self._workers and self._ready:
            namespace, queue = next(iter(self._ready.items()))
            key = queue.popleft()
            # Round-robin: the namespace goes to the back of the line.
            del self._ready[namespace]
            if queue:
                self._ready[namespace] = queue
            if key not in self._queued or key in self._running:
                continue  # stale: the key went through the other lane
            self._start_queued(key)

    def _start_queued(self, key: Key) -> None:
        """Start a key taken from the due lane or a ready queue: a copy waiting in the
        other one is stale now."""
        self._due_queued.discard(key)
        self._queued.discard(key)
        self._start(key)

    def _dispatch_routine(self) -> None:
        """Postponed routine writes, oldest first, into the free routine slots."""
        while (
            len(self._running) < self._workers
            and len(self._routine_running) < self._routine_slots
            and self._routine
        ):
            key, _ = self._routine.popitem(last=False)
            if key in self._running:  # being looked at anyway; it postpones again if need be
                continue
            self._routine_running.add(key)
            self._start(key)

    def _start(self, key: Key) -> None:
        self._running.add(key)
        task = asyncio.create_task(self._work(key), name=f"schedule {key[0]}/{key[1]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _work(self, key: Key) -> None:
        next_wake: datetime | None = None
        instant = self._woken_for.get(key)
        try:
            next_wake = await self._process(key)
            # A pass woken ahead ends no sooner than its instant: the wake-up it returns
            # (a retry a second on) is then reckoned as without `ahead`. Reckoned from
            # before it, one within `ahead` was served again at once, and again (the
            # simulator's loop never went quiet at AHEAD=2).
            while instant is not None and (left := self._seconds_until(instant)) > 0:
                await self._sleeper.sleep(left)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("processing %s/%s failed; retrying in 5 s", *key)
            next_wake = self._clock.now() + timedelta(seconds=5)
        finally:
            self._running.discard(key)
            self._routine_running.discard(key)
            if key not in self._dirty_due:  # else woken again while running: for that pass
                self._woken_for.pop(key, None)
        self.wake_at(key, next_wake)
        by = self._dirty_by.pop(key, None)
        if by is not None:
            self.wake_by(key, by)
        if key in self._dirty_due:
            self._dirty_due.discard(key)
            self._dirty.discard(key)
            self._notify_due(key)
        elif key in self._dirty:
            self._dirty.discard(key)
            self.notify(key)
        self._kick.set()
