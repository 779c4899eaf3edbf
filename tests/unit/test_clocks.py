"""Clocks: the fixed test clock, and the estimate of the API server's clock.

The server is simulated: its clock is off from ours by a known offset, it stamps
each response with a whole-second Date header (as HTTP does, truncated), and each
request and response takes a small random time on the wire. The local clock is a
FixedClock that the simulation advances, so no test reads the real time.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from punctual.clocks import FixedClock, ServerClock

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
TRUE_OFFSET = 37.4  # the server's clock runs 37.4 s ahead of ours


# -- FixedClock --------------------------------------------------------------------


def test_fixed_clock_says_what_it_is_told() -> None:
    clock = FixedClock(T0)
    assert clock.now() == T0
    assert clock.now() == T0  # it does not move by itself


def test_fixed_clock_advances_by_fractional_and_negative_seconds() -> None:
    clock = FixedClock(T0)
    clock.advance(1.5)
    assert clock.now() == T0 + timedelta(seconds=1.5)
    clock.advance(3600)
    assert clock.now() == T0 + timedelta(hours=1, seconds=1.5)
    clock.advance(-3601.5)
    assert clock.now() == T0
    clock.advance(0.000_001)
    assert clock.now() - T0 == timedelta(microseconds=1)
    assert clock.now().tzinfo is not None


# -- ServerClock -------------------------------------------------------------------


class SimulatedServer:
    """An API server whose clock is `offset` seconds ahead of the local FixedClock."""

    def __init__(self, local: FixedClock, *, offset: float, seed: int) -> None:
        self.local = local
        self.offset = offset
        self.rng = random.Random(seed)

    def true_offset(self) -> timedelta:
        return timedelta(seconds=self.offset)

    def request(self, clock: ServerClock) -> None:
        """One round trip, observed by `clock` the way the API client observes it."""
        sent = self.local.now()
        self.local.advance(self.rng.uniform(0.001, 0.03))  # on the way there
        server_time = self.local.now() + self.true_offset()
        date = server_time.replace(microsecond=0)  # a Date header: whole seconds, truncated
        self.local.advance(self.rng.uniform(0.001, 0.03))  # on the way back
        clock.observe(sent, self.local.now(), date)
        self.local.advance(self.rng.uniform(0.2, 3.0))  # until the next request


def _within(clock: ServerClock, truth: timedelta) -> bool:
    """Whether the truth lies in the interval the clock claims to know."""
    return clock.offset - clock.uncertainty <= truth <= clock.offset + clock.uncertainty


def test_before_any_response_the_server_clock_is_the_local_clock() -> None:
    local = FixedClock(T0)
    clock = ServerClock(local)
    assert clock.samples == 0
    assert clock.offset == timedelta(0)
    assert clock.now() == T0
    assert clock.local_now() == T0


def test_one_response_bounds_the_offset_to_about_a_second() -> None:
    local = FixedClock(T0 + timedelta(milliseconds=300))
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=1)
    clock = ServerClock(local)
    server.request(clock)
    assert clock.samples == 1
    assert _within(clock, server.true_offset())
    # A whole-second header plus two short trips: at most about half a second each way.
    assert clock.uncertainty <= timedelta(seconds=0.55)
    assert abs(clock.offset - server.true_offset()) <= timedelta(seconds=1)


def test_the_offset_converges_within_a_tenth_of_a_second_after_twenty_samples() -> None:
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=0)
    clock = ServerClock(local)
    widths = []
    for _ in range(20):
        server.request(clock)
        assert _within(clock, server.true_offset())  # never wrong about what it knows
        widths.append(clock.uncertainty)

    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1)
    assert widths == sorted(widths, reverse=True)  # each response can only narrow it
    assert widths[-1] < widths[0] / 2
    assert widths[-1] < timedelta(seconds=0.1)
    # now() is the local clock corrected by the estimate.
    assert abs(clock.now() - (local.now() + server.true_offset())) < timedelta(seconds=0.1)
    assert clock.local_now() == local.now()


def test_convergence_does_not_depend_on_lucky_timing() -> None:
    # How fast the interval narrows depends on where in its second the server stamped
    # each Date. Over many simulated histories: nearly always within 0.1 s after 20
    # responses, always after 40, and never wrong about its own uncertainty.
    after_20 = []
    for seed in range(200):
        local = FixedClock(T0)
        server = SimulatedServer(local, offset=TRUE_OFFSET, seed=seed)
        clock = ServerClock(local)
        for i in range(1, 41):
            server.request(clock)
            assert _within(clock, server.true_offset()), (seed, i)
            if i == 20:
                after_20.append(abs(clock.offset - server.true_offset()))
        assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1), seed
        assert clock.uncertainty < timedelta(seconds=0.15), seed
    close = sum(1 for error in after_20 if error < timedelta(seconds=0.1))
    assert close >= 0.95 * len(after_20)


@pytest.mark.parametrize("offset", [-3600.0, -0.7, 0.0, 0.25, 86_400.9])
def test_any_offset_is_learned_the_same_way(offset: float) -> None:
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=offset, seed=42)
    clock = ServerClock(local)
    for _ in range(30):
        server.request(clock)
    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1)
    assert _within(clock, server.true_offset())


@pytest.mark.parametrize("jump", [60.0, -60.0], ids=["server jumps ahead", "server jumps back"])
def test_a_clock_jump_restarts_the_estimate_at_the_new_offset(jump: float) -> None:
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=7)
    clock = ServerClock(local)
    for _ in range(25):
        server.request(clock)
    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1)

    server.offset += jump
    server.request(clock)
    # The first response after the jump contradicts everything before it: start over.
    assert clock.samples == 1
    assert _within(clock, server.true_offset())
    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=1)
    for _ in range(25):
        server.request(clock)
        assert _within(clock, server.true_offset())
    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1)


def test_a_local_clock_jump_is_a_clock_jump_too() -> None:
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=3)
    clock = ServerClock(local)
    for _ in range(25):
        server.request(clock)
    # Our clock is stepped back a minute (NTP): the server is now 60 s further ahead.
    local.advance(-60)
    server.offset += 60
    for _ in range(25):
        server.request(clock)
    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1)
    assert abs(clock.now() - (local.now() + server.true_offset())) < timedelta(seconds=0.1)


def test_a_small_step_is_not_stuck_on_the_old_estimate() -> None:
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=11)
    clock = ServerClock(local)
    for _ in range(25):
        server.request(clock)
    server.offset -= 0.5  # a step smaller than a Date header's resolution
    for _ in range(40):
        server.request(clock)
    assert abs(clock.offset - server.true_offset()) < timedelta(seconds=0.1)
    assert _within(clock, server.true_offset())


def test_a_slow_response_does_not_spoil_a_good_estimate() -> None:
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=5)
    clock = ServerClock(local)
    for _ in range(20):
        server.request(clock)
    before = (clock.offset, clock.uncertainty)
    # Ten seconds on the wire: the response bounds the offset only loosely.
    sent = local.now()
    local.advance(5)
    date = (local.now() + server.true_offset()).replace(microsecond=0)
    local.advance(5)
    clock.observe(sent, local.now(), date)
    assert (clock.offset, clock.uncertainty) == before
    assert clock.samples == 21


def test_a_herd_of_slow_responses_does_not_push_out_the_precise_ones() -> None:
    # A thousand schedules firing at once: hundreds of responses a second, each half a
    # second late. They bound the offset loosely; the estimate must stay as it was, or
    # now() falls behind by their latency and due ticks look not yet due.
    local = FixedClock(T0)
    server = SimulatedServer(local, offset=TRUE_OFFSET, seed=3)
    clock = ServerClock(local)
    for _ in range(20):
        server.request(clock)
    before = (clock.offset, clock.uncertainty)
    assert before[1] < timedelta(seconds=0.1)
    for _ in range(500):
        sent = local.now()
        local.advance(0.25)
        date = (local.now() + server.true_offset()).replace(microsecond=0)
        local.advance(0.25)
        clock.observe(sent, local.now(), date)
        local.advance(-0.49)  # the next one was sent 10 ms after this one
    assert (clock.offset, clock.uncertainty) == before
    assert _within(clock, server.true_offset())
