"""The FreezeWindows as the operator follows them: kopf's events arriving while the
leader writes their status, against the recording fake API server.

A window changed while a status write awaited the API server once crashed the operator
("dictionary keys changed during iteration"): the writer walks the dicts it was handed,
and an event must replace them, never change them in place.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from punctual.clocks import FixedClock
from punctual.kube.client import KubeClient
from punctual.kube.schedulewatching import pack
from punctual.kube.sharding import ShardedElection
from punctual.runtime.freezewindows import FreezeWindows
from punctual.runtime.view import LeaderView

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def window(name: str) -> dict[str, Any]:
    spec = {
        "start": "2026-11-26T00:00:00Z",
        "end": "2026-11-27T00:00:00Z",
        "selector": {"matchLabels": {"tier": "web"}},
    }
    return {"metadata": {"namespace": "team", "name": name}, "spec": spec}


async def test_a_window_changed_while_status_is_written_neither_crashes_nor_is_lost() -> None:
    schedule = {"metadata": {"name": "a", "namespace": "team", "uid": "uid-a"}, "spec": {}}
    written: list[str] = []
    windows: FreezeWindows

    async def report(path: str, status: dict[str, Any]) -> bool:
        written.append(path.rsplit("/", 2)[-2])
        await asyncio.sleep(0)  # the API server answering: kopf's next event arrives
        windows.changed("team", "later", window("later"))
        windows.changed("team", "first", None)
        return True

    windows = FreezeWindows(
        cast(KubeClient, SimpleNamespace()),
        [],
        view=LeaderView({("team", "a"): pack(schedule)}, {}),
        election=cast(
            ShardedElection, SimpleNamespace(electors=[SimpleNamespace(is_leader=lambda: True)])
        ),
        clock=FixedClock(T0),
        notify=lambda key: None,
        report=report,
    )
    windows.changed("team", "first", window("first"))
    windows.changed("team", "second", window("second"))
    await windows._write_status(windows.known)  # the two it was handed, both written
    assert written == ["first", "second"]
    assert set(windows.known["team"]) == {"second", "later"}  # the events during it kept
