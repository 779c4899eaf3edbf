"""Who runs after whom: the downstreams of each schedule, as the schedule index shows them.

Why it exists: a schedule with spec.after (`core.chaining`) must be decided again when
one of its upstreams' runs ends, or the upstream's status records it, or the upstream
goes away; nothing else would wake it (it has no tick of its own to wait for). The
scheduler loop wakes schedules by key, so this index answers "whose upstream is this
key?" from the spec.after of every schedule seen, as `kube.groups` answers for a
concurrency group's members. A wake is only a hint: the downstream's decision reads the
upstream's recorded outcomes itself, so a wake lost to a restart loses nothing (a new
leader decides every schedule).

What it must never do: decide, write, or read anything but the bodies it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from punctual.core.chaining import after_names

Key = tuple[str, str]


class Downstreams:
    """The schedules naming each schedule in spec.after (same namespace)."""

    def __init__(self) -> None:
        self._of: dict[Key, set[Key]] = {}  # upstream -> its downstreams
        self._names: dict[Key, tuple[str, ...]] = {}  # downstream -> its upstreams' names

    def observe(self, key: Key, body: Mapping[str, Any] | None) -> None:
        """Follow a schedule's change (None: deleted)."""
        for name in self._names.pop(key, ()):
            self._of.get((key[0], name), set()).discard(key)
        names = after_names(body)
        if names:
            self._names[key] = names
            for name in names:
                self._of.setdefault((key[0], name), set()).add(key)

    def of(self, key: Key) -> list[Key]:
        """The schedules that run after `key`'s runs."""
        return sorted(self._of.get(key, ()))
