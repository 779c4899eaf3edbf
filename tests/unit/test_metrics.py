"""The per-schedule gauges: kept for the schedules that ask for them, as the index tells of
each change, and exported only by the replica that leads the schedule's shard; and the
heap gauge, which follows live objects where resident memory does not."""

from __future__ import annotations

from typing import Any

from punctual.metrics import Metrics

KEY = ("team-a", "nightly")


def body(spec: dict[str, Any], status: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "spec": spec, "status": status}


def value(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"namespace": KEY[0], "schedule": KEY[1]})


def test_a_paused_schedule_that_asks_is_exported_by_its_leader_only() -> None:
    metrics = Metrics()
    paused = {"conditions": [{"type": "Paused", "status": "True"}]}
    metrics.per_schedule.observe(KEY, body({"pauseOnFailure": {"after": 3}}, paused))
    metrics.per_schedule.export(lambda uid: uid == "u1")
    assert value(metrics, "punctual_schedule_paused") == 1
    assert value(metrics, "punctual_schedule_stale") is None  # it did not ask for that one
    metrics.per_schedule.export(lambda uid: False)  # another replica leads its shard
    assert value(metrics, "punctual_schedule_paused") is None


def test_stale_and_last_success_follow_the_status_and_a_bad_time_is_no_gauge() -> None:
    metrics = Metrics()
    spec = {"successDeadlineSeconds": 3600}
    status = {"lastSuccessfulTime": "2026-11-26T10:00:00Z", "conditions": []}
    metrics.per_schedule.observe(KEY, body(spec, status))
    metrics.per_schedule.export(lambda uid: True)
    assert value(metrics, "punctual_schedule_stale") == 0
    assert value(metrics, "punctual_last_success_timestamp_seconds") == 1795687200.0
    stale = {"lastSuccessfulTime": "yesterday", "conditions": [{"type": "Stale", "status": "True"}]}
    metrics.per_schedule.observe(KEY, body(spec, stale))
    metrics.per_schedule.export(lambda uid: True)
    assert value(metrics, "punctual_schedule_stale") == 1
    assert value(metrics, "punctual_last_success_timestamp_seconds") is None


def test_a_schedule_that_stops_asking_or_is_deleted_is_forgotten() -> None:
    metrics = Metrics()
    metrics.per_schedule.observe(KEY, body({"pauseOnFailure": {"after": 1}}, {}))
    metrics.per_schedule.export(lambda uid: True)
    assert value(metrics, "punctual_schedule_paused") == 0
    metrics.per_schedule.observe(KEY, body({}, {}))  # edited: no longer asks
    metrics.per_schedule.export(lambda uid: True)
    assert value(metrics, "punctual_schedule_paused") is None
    metrics.per_schedule.observe(KEY, body({"pauseOnFailure": {"after": 1}}, {}))
    metrics.per_schedule.observe(KEY, None)  # deleted
    metrics.per_schedule.export(lambda uid: True)
    assert value(metrics, "punctual_schedule_paused") is None


def test_the_heap_gauge_rises_with_live_objects_and_falls_when_they_are_freed() -> None:
    metrics = Metrics()

    def heap() -> float:
        blocks = metrics.registry.get_sample_value("punctual_heap_blocks")
        assert blocks is not None
        return blocks

    before = heap()
    held = [{"tick": i} for i in range(200_000)]
    during = heap()
    del held
    after = heap()
    assert during - before > 200_000  # a dict each, read at the scrape, not at start
    assert during - after > 200_000


def test_a_deleted_schedules_counters_go_and_the_others_stay() -> None:
    metrics = Metrics()
    for schedule in ("nightly", "hourly"):
        metrics.jobs_created.labels("team-a", schedule).inc()
        metrics.ticks_missed.labels("team-a", schedule).inc()
        metrics.ticks_skipped.labels("team-a", schedule, "concurrencyPolicy=Forbid").inc()
    metrics.forget_schedule(
        "team-a", "nightly", skip_reasons=["concurrencyPolicy=Forbid", "maxConcurrent"]
    )
    text = metrics.exposition().decode()
    assert 'schedule="nightly"' not in text
    kept = [line for line in text.splitlines() if "_total{" in line and "hourly" in line]
    assert len(kept) == 3
    metrics.forget_schedule("team-a", "never-seen", skip_reasons=["maxConcurrent"])  # no error
