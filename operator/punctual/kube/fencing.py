"""The Fence: the epoch the API server's admission policy checks every Job create against.

Why it exists: between "I still lead" and the create arriving at the API server, a
leader can be paused and replaced. A ValidatingAdmissionPolicy
(crds/fencing.punctual.dev.yaml) admits a Punctual Job only when its leader and
epoch annotations match this Fence object, which each new leader raises before it
writes anything. A stale leader's create is then refused by the server itself.

With shards (kube.sharding) the one Fence holds one entry per shard,
`spec.shards["<i>-of-<n>"] = {holder, epoch}`, and the shard count, `spec.shardCount`;
each Job is labelled with its shard (`punctual.dev/shard`) and judged against that
entry. The count makes a change of `--shards` safe: the Fence admits the Jobs of one
count only, and a replica of another count may switch it (dropping the old count's
entries) only once every Lease of the old count is dead. Without shards `spec.holder`
and `spec.epoch` are used exactly as before, and `shardCount` is absent (meaning 1).

The decision (what the Fence's spec becomes, or that it must not move) is the pure
function `raised`, table-tested in tests/unit/test_fencing.py.

What it must never do: lower the fence, or report a fence raised that it could not
raise. Every write carries the resourceVersion it read, so a leader that lost its
Lease can neither lower the fence nor pass a newer one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from punctual.kube.client import AlreadyExists, Api, ApiError, Conflict, NotFound

logger = logging.getLogger(__name__)

# Writers of different shards share the one Fence: a 409 from another shard's raise is
# read again and retried at once, this many times, before waiting for the next round.
ATTEMPTS = 4


def fence_path(namespace: str) -> str:
    return f"/apis/punctual.dev/v1/namespaces/{namespace}/fences"


def fence_count(spec: Mapping[str, Any]) -> int:
    """The shard count whose Jobs the Fence admits (absent: 1, as before shards)."""
    return int(spec.get("shardCount") or 1)


def entry_epoch(spec: Mapping[str, Any], key: str | None) -> int | None:
    """The epoch the Fence holds for shard `key` (None: the unsharded entry); None when
    it holds none for it."""
    if key is None:
        return int(spec["epoch"]) if "epoch" in spec else None
    entry = (spec.get("shards") or {}).get(key)
    return None if entry is None else int(entry.get("epoch", -1))


def raised(
    current: Mapping[str, Any] | None,
    *,
    holder: str,
    epoch: int,
    key: str | None,
    count: int,
    other_count_alive: bool,
) -> dict[str, Any] | None:
    """The Fence's spec once `holder` leads shard `key` of `count` at `epoch`, or None
    when it must not be raised: a newer leader holds the entry, or the Fence admits
    another shard count whose Leases are not all dead yet.

    The unsharded entry (`holder`, `epoch`) is kept across every change: it only moves
    up, so that a later return to one shard starts above it.
    """
    spec = dict(current or {})
    same_count = current is None or fence_count(spec) == count
    if not same_count and other_count_alive:
        return None
    if same_count:
        held = entry_epoch(spec, key)
        if held is not None and held > epoch:
            return None
    if key is None:
        spec.pop("shardCount", None)
        spec.pop("shards", None)
        return {**spec, "holder": holder, "epoch": epoch}
    shards = dict(spec.get("shards") or {}) if same_count else {}
    shards[key] = {"holder": holder, "epoch": epoch}
    return {
        "holder": spec.get("holder", ""),
        "epoch": spec.get("epoch", 0),
        "shardCount": count,
        "shards": shards,
    }


async def fence_epoch(api: Api, namespace: str, name: str, *, key: str | None = None) -> int | None:
    """The epoch the Fence holds for shard `key` (None: no Fence yet, no entry for it, or
    it cannot be read)."""
    try:
        current = await api.get(f"{fence_path(namespace)}/{name}")
    except ApiError:
        return None
    return entry_epoch(current.get("spec") or {}, key)


async def raise_fence(
    api: Api,
    namespace: str,
    name: str,
    holder: str,
    epoch: int,
    *,
    key: str | None = None,
    count: int = 1,
    count_alive: Callable[[int], Awaitable[bool]] | None = None,
) -> bool:
    """Raise the Fence `namespace/name` to `epoch` for `holder` (in shard `key`'s entry
    when sharded); True once it says so.

    False when another writer of the same entry got there first (try again next round),
    when the entry is already above `epoch` (a newer leader exists), when the Fence
    admits another shard count that `count_alive` says still has a live Lease, or on any
    API error: until it is raised, the caller does not lead, so a replica without the
    permission to write the fence never fires (and says why in its log).
    """
    path = fence_path(namespace)
    for _ in range(ATTEMPTS):
        try:
            try:
                current = await api.get(f"{path}/{name}")
            except NotFound:
                spec = raised(
                    None, holder=holder, epoch=epoch, key=key, count=count, other_count_alive=False
                )
                assert spec is not None
                await api.create(
                    path,
                    {
                        "apiVersion": "punctual.dev/v1",
                        "kind": "Fence",
                        "metadata": {"name": name, "namespace": namespace},
                        "spec": spec,
                    },
                )
            else:
                old = current.get("spec") or {}
                other = fence_count(old)
                alive = False
                if other != count:
                    alive = True if count_alive is None else await count_alive(other)
                new = raised(
                    old, holder=holder, epoch=epoch, key=key, count=count, other_count_alive=alive
                )
                if new is None:
                    logger.warning(
                        "fence %s not raised for %s epoch %d: %s",
                        name,
                        key or "the leader",
                        epoch,
                        f"shard count {other} still has a live Lease"
                        if other != count
                        else f"it holds epoch {entry_epoch(old, key)}",
                    )
                    return False
                await api.replace(f"{path}/{name}", {**current, "spec": new})
        except (AlreadyExists, Conflict):
            if key is None:
                return False  # one entry, one writer at a time: the next round decides
            continue  # another shard's raise: read again
        except ApiError as error:
            logger.error("cannot raise Fence %s/%s: %s", namespace, name, error)
            return False
        logger.info("raised fence %s%s to epoch %d", name, f" [{key}]" if key else "", epoch)
        return True
    return False
