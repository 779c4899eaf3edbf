"""kopf watches CronSchedules and keeps them in an in-memory index.

Why it exists: every replica, leader or not, keeps a warm view of all schedules (a hot
standby fails over in one Lease expiry, not a re-list), and wakes the scheduler when
something changes. Their Jobs are indexed by kube.jobwatching, without kopf: a Job
changes several times per firing, and kopf's per-event machinery cost more than the
firing itself. kopf does the watching (re-lists, reconnects,
410 Gone); this module only declares what to keep and whom to tell.

What it must never do: make kopf write to user objects. Only index and event
handlers are registered: no change handlers, hence no finalizers, no
`kopf.zalando.org` annotations and no status keys written by kopf, and kopf's own
Event posting is switched off. Punctual's writes go through its own client.

kopf runs event handlers only after every index has been filled by the initial
listing, so the first schedule event means the schedule index is complete; the Job
index says so itself (`JobIndex.ready`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.engines.peering import Identity

from punctual.kube.client import Credentials

Key = tuple[str, str]

SCHEDULES_INDEX = "punctual_schedules"
JOBS_INDEX = "punctual_jobs"  # kube.jobwatching's index, read through the same lookup


class NoDiffBase(kopf.DiffBaseStorage):
    """No "last handled state": Punctual registers no change handlers to compare it for.

    kopf builds a deep copy of every object on every event to diff it against the
    last handled one; that was a tenth of the operator's CPU while a thousand Jobs
    changed at once, for a diff nothing reads.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        pass


def without_managed_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body without metadata.managedFields: half of a schedule's memory, never read.

    (10 000 schedules held 190 MB of bodies, 97 MB of it the field managers' trees.)
    """
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    return {**body, "metadata": meta}


def pack(body: Mapping[str, Any]) -> str:
    """A schedule as the index keeps it: compact JSON, without managedFields.

    As Python dicts a schedule takes about 9 KB (19 KB with managedFields); as JSON
    about 1.5 KB. The index holds every schedule for as long as it exists and is read
    once per decision, and parsing it back costs tens of microseconds.
    """
    return json.dumps(without_managed_fields(body), separators=(",", ":"))


def unpack(packed: str) -> dict[str, Any]:
    """The schedule body that `pack` kept: a fresh dict, the caller's to change."""
    body: dict[str, Any] = json.loads(packed)
    return body


def make_registry(
    *,
    credentials: Credentials,
    on_schedule: Callable[[Key, str | None], None],
    on_freeze: Callable[[str, str, dict[str, Any] | None], None] | None = None,
) -> kopf.OperatorRegistry:
    """A private kopf registry with Punctual's schedule index and event handler (Jobs are
    watched by kube.jobwatching, without kopf's per-event machinery)."""
    registry = kopf.OperatorRegistry()
    _configure(registry)
    _login(registry, credentials)

    # Every handler is a coroutine: kopf runs a plain function in a thread pool, and with
    # a thousand Jobs changing at once the threads' hand-offs cost more than the handlers.

    @kopf.index("punctual.dev", "v1", "cronschedules", id=SCHEDULES_INDEX, registry=registry)
    async def schedules(**event: Any) -> dict[Key, str]:
        return {(event["namespace"], event["name"]): pack(event["body"])}

    @kopf.on.event("punctual.dev", "v1", "cronschedules", registry=registry)
    async def schedule_changed(**event: Any) -> None:
        meta = event["body"].get("metadata", {})
        on_schedule((event["namespace"], event["name"]), meta.get("resourceVersion"))

    if on_freeze is not None:
        # No index: an index of a resource whose CRD is not installed (an upgrade that
        # skipped the CRDs) must not hold back the schedules; the leader also lists them.
        @kopf.on.event("punctual.dev", "v1", "freezewindows", registry=registry)
        async def freeze_changed(**event: Any) -> None:
            gone = event["type"] == "DELETED"
            body = None if gone else without_managed_fields(event["body"])
            on_freeze(event["namespace"], event["name"], body)

    return registry


def _configure(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # kopf posts no Events; Punctual posts its own
        settings.persistence.diffbase_storage = NoDiffBase()
        # kopf keeps a worker task (with its queue and last event) per object until it
        # has been idle this long: 5 s by default, a thousand live workers while 10 000
        # Jobs are created in a minute. Our handlers are instant; half a second is ample.
        settings.queueing.idle_timeout = 0.5
        settings.watching.connect_timeout = 5
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.request_timeout = 30


def _login(registry: kopf.OperatorRegistry, credentials: Credentials) -> None:
    import aiohttp  # (here, not at the top: only this function needs them)

    from punctual.kube.client import Auth, CredentialsError

    given: list[Auth] = []  # what kopf was given last

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo | kopf.AiohttpSession:
        """The current credentials, whenever kopf asks: at start, after a 401, at expiration.

        An exec plugin's or auth-provider's credential is renewed (off the event loop, as
        for Punctual's client) when kopf asks again, since what it had was rejected or
        expired; `expiration` makes kopf ask when it is due. kopf's ConnectionInfo cannot
        carry a tls-server-name: with one, kopf gets a session whose TLS context names
        the server itself.
        """
        if given:
            credentials.reject(given.pop())
        try:
            auth = await credentials.authenticate()
        except CredentialsError as error:
            raise kopf.TemporaryError(f"cannot renew credentials: {error}", delay=5) from error
        given.append(auth)
        issued = auth.issued
        expiration = issued.renew_at if issued else None
        if credentials.tls_server_name:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=auth.tls),
                headers={"Authorization": f"Bearer {auth.token}"} if auth.token else {},
                proxy=credentials.proxy,
            )
            return kopf.AiohttpSession(
                server=credentials.server,
                default_namespace=credentials.namespace,
                expiration=expiration,
                aiohttp_session=session,
            )
        certificate = issued if issued and issued.cert_pem and issued.key_pem else None
        return kopf.ConnectionInfo(
            server=credentials.server,
            ca_path=credentials.ca_file,
            insecure=credentials.insecure,
            token=auth.token,
            certificate_path=None if certificate else credentials.cert_file,
            private_key_path=None if certificate else credentials.key_file,
            certificate_data=certificate.cert_pem if certificate else None,
            private_key_data=certificate.key_pem if certificate else None,
            default_namespace=credentials.namespace,
            proxy_url=credentials.proxy,
            expiration=expiration,
        )


def new_indexers() -> OperatorIndexers:
    """The store of kopf's indices, which the scheduler reads outside kopf's handlers.

    kopf.operator() accepts it but kopf does not export its type; this is the one place
    that reaches into kopf's internals for it.
    """
    return OperatorIndexers()


async def watch(
    *,
    registry: kopf.OperatorRegistry,
    indexers: OperatorIndexers,
    namespaces: list[str],
    identity: str,
    stop_flag: asyncio.Future[None],
    ready_flag: asyncio.Event,
) -> None:
    """kopf's watches and indices until `stop_flag` (all namespaces when none is named)."""
    await kopf.operator(
        registry=registry,
        indexers=indexers,
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        # Without it kopf asks getpass.getuser(), which raises in an image whose numeric
        # user has no passwd entry: the process died before watching.
        identity=Identity(identity),
    )


def quiet_kopf(level: int = logging.WARNING) -> None:
    """kopf logs every event at INFO; keep only its warnings."""
    logging.getLogger("kopf").setLevel(level)
