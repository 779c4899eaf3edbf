"""How the watch's index keeps a schedule: everything decisions read, nothing else."""

from __future__ import annotations

import sys
from typing import Any

from punctual.kube.watching import pack, unpack

BODY: dict[str, Any] = {
    "apiVersion": "punctual.dev/v1",
    "kind": "CronSchedule",
    "metadata": {
        "name": "nightly",
        "namespace": "team-a",
        "uid": "4b1d",
        "resourceVersion": "4711",
        "generation": 3,
        "annotations": {"punctual.dev/trigger": "req-1"},
        "managedFields": [
            {
                "manager": "kubectl",
                "operation": "Apply",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:schedule": {}, "f:jobTemplate": {"f:spec": {}}}},
            }
        ],
    },
    "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"backoffLimit": 2}}},
    "status": {"lastScheduledTime": "2026-11-25T02:00:00Z", "inFlight": []},
}


def deep_size(value: Any) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k) + deep_size(v) for k, v in value.items())
    elif isinstance(value, list):
        size += sum(deep_size(v) for v in value)
    return size


def test_packing_keeps_everything_but_managed_fields() -> None:
    body = unpack(pack(BODY))
    expected = {
        **BODY,
        "metadata": {k: v for k, v in BODY["metadata"].items() if k != "managedFields"},
    }
    assert body == expected
    assert "managedFields" in BODY["metadata"]  # the event's body is left alone


def test_unpacking_gives_a_fresh_body_each_time() -> None:
    packed = pack(BODY)
    first = unpack(packed)
    first["status"]["inFlight"].append({"tick": "x"})
    assert unpack(packed)["status"]["inFlight"] == []


def test_a_packed_schedule_is_several_times_smaller_than_its_dicts() -> None:
    packed = pack(BODY)
    assert deep_size(unpack(packed)) > 3 * sys.getsizeof(packed)
