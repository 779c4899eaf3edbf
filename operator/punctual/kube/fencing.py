"""The Fence: the epoch the API server's admission policy checks every Job create against.

Why it exists: between "I still lead" and the create arriving at the API server, a
leader can be paused and replaced. A ValidatingAdmissionPolicy
(crds/fencing.punctual.dev.yaml) admits a Punctual Job only when its leader and
epoch annotations match this Fence object, which each new leader raises before it
writes anything. A stale leader's create is then refused by the server itself.

What it must never do: lower the fence, or report a fence raised that it could not
raise. Every write carries the resourceVersion it read, so a leader that lost its
Lease can neither lower the fence nor pass a newer one.
"""

from __future__ import annotations

import logging

from punctual.kube.client import AlreadyExists, Api, ApiError, Conflict, NotFound

logger = logging.getLogger(__name__)


def fence_path(namespace: str) -> str:
    return f"/apis/punctual.dev/v1/namespaces/{namespace}/fences"


async def fence_epoch(api: Api, namespace: str, name: str) -> int | None:
    """The epoch the Fence is at (None: no Fence yet, or it cannot be read)."""
    try:
        current = await api.get(f"{fence_path(namespace)}/{name}")
    except ApiError:
        return None
    return int((current.get("spec") or {}).get("epoch", -1))


async def raise_fence(api: Api, namespace: str, name: str, holder: str, epoch: int) -> bool:
    """Raise the Fence `namespace/name` to `epoch` for `holder`; True once it says so.

    False when another writer got there first (try again next round), when the fence
    is already above `epoch` (a newer leader exists), or on any API error: until it
    is raised, the caller does not lead, so a replica without the permission to write
    the fence never fires (and says why in its log).
    """
    path = fence_path(namespace)
    spec = {"holder": holder, "epoch": epoch}
    try:
        try:
            current = await api.get(f"{path}/{name}")
        except NotFound:
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
            raised = int((current.get("spec") or {}).get("epoch", -1))
            if raised > epoch:
                logger.warning("fence %s is at epoch %d, above ours (%d)", name, raised, epoch)
                return False
            await api.replace(f"{path}/{name}", {**current, "spec": spec})
    except (AlreadyExists, Conflict):
        return False
    except ApiError as error:
        logger.error("cannot raise Fence %s/%s: %s", namespace, name, error)
        return False
    logger.info("raised fence %s to epoch %d", name, epoch)
    return True
