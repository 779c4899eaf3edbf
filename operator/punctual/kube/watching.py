"""kopf follows the small kinds and tells the operator of each change.

Why it exists: the kinds a decision reads besides its schedule and Jobs are few and
rarely change: FreezeWindows, ClusterFreezeWindows, Calendars, ConcurrencyGroups and the
Namespaces (their labels, which a ClusterFreezeWindow selects). kopf follows them all,
one way (re-lists, reconnects, 410 Gone, a CRD installed after the start), on every
replica, so a standby that takes over knows them already; a kind whose CRD is not
installed is simply not served, and the operator keeps firing. CronSchedules and Jobs
change with every firing and are followed without kopf's per-event machinery
(kube.schedulewatching, kube.jobwatching): through kopf each event cost more than
deciding the firing.

What it must never do: make kopf write to user objects. Only an event handler is
registered: no change handlers, hence no finalizers, no `kopf.zalando.org`
annotations and no status keys written by kopf, and kopf's own Event posting is
switched off. Punctual's writes go through its own client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

import kopf
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.engines.peering import Identity

from punctual.kube.credentials import Credentials
from punctual.kube.following import without_managed_fields


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


# The small kinds kopf follows, as kopf names them: (group, version, plural), or
# ("v1", plural) for the core group.
SMALL_KINDS: Final[tuple[tuple[str, ...], ...]] = (
    ("punctual.dev", "v1", "freezewindows"),
    ("punctual.dev", "v1", "clusterfreezewindows"),
    ("punctual.dev", "v1", "calendars"),
    ("punctual.dev", "v1", "concurrencygroups"),
    ("v1", "namespaces"),
)

# Told of each change: (plural, namespace or None, the object without its managedFields,
# whether it is gone).
Changed = Callable[[str, str | None, dict[str, Any], bool], None]


def make_registry(
    *, credentials: Credentials, on_change: Changed | None = None
) -> kopf.OperatorRegistry:
    """A private kopf registry with an event handler for each of the small kinds."""
    registry = kopf.OperatorRegistry()
    _configure(registry)
    _login(registry, credentials)
    if on_change is not None:
        for kind in SMALL_KINDS:
            _follow(registry, kind, on_change)
    return registry


def _follow(registry: kopf.OperatorRegistry, kind: tuple[str, ...], on_change: Changed) -> None:
    # A coroutine: kopf runs a plain function in a thread pool. No index: an index of a
    # resource whose CRD is not installed (an upgrade that skipped the CRDs) would hold
    # kopf back; the operator lists each kind once at the start instead (readiness).
    plural = kind[-1]

    @kopf.on.event(*kind, id=f"follow-{plural}", registry=registry)
    async def changed(**event: Any) -> None:
        gone = event["type"] == "DELETED"
        on_change(plural, event.get("namespace"), without_managed_fields(event["body"]), gone)


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

    from punctual.kube.credentials import Auth, CredentialsError

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
