"""Punctual's own async client for the Kubernetes API: the one layer that writes.

kopf watches; every write Punctual makes (fenced status claims, Job creates, Lease
renewals) goes through this client, so that preconditions such as
`metadata.resourceVersion` are explicit and every 409 is seen and classified, never
retried blindly. It is deliberately small: JSON over HTTPS with a bearer token or a
client certificate, from a kubeconfig or the in-cluster service account.

It never decides anything: callers get typed errors (`Conflict`, `AlreadyExists`,
`NotFound`, `Invalid`) and decide what they mean.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Protocol, Self

import aiohttp
import yaml

from punctual.clocks import ServerClock

Body = dict[str, Any]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status reason and message."""

    def __init__(self, status: int, reason: str, message: str, body: Body | None = None):
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class Conflict(ApiError):
    """409 Conflict: a resourceVersion precondition failed; someone else wrote first."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: an object with this name exists."""


class NotFound(ApiError):
    """404 NotFound."""


class Invalid(ApiError):
    """422 Invalid: the object was rejected by validation (schema, CEL, admission)."""


class Unavailable(ApiError):
    """The API server could not be reached or answered 5xx/429: retry later with backoff."""


def _classify(status: int, body: Body) -> ApiError:
    reason = str(body.get("reason", "")) or str(status)
    message = str(body.get("message", "")) or json.dumps(body)[:500]
    if status == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 404:
        cls = NotFound
    elif status == 422:
        cls = Invalid
    elif status == 429 or status >= 500:
        cls = Unavailable
    else:
        cls = ApiError
    return cls(status, reason, message, body)


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate to it."""

    server: str
    ca_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    namespace: str = "default"

    def bearer(self) -> str | None:
        if self.token_file:
            return Path(self.token_file).read_text().strip()  # re-read: projected tokens rotate
        return self.token

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _materialize(data_b64: str | None, path: str | None, base: Path, suffix: str) -> str | None:
    """A kubeconfig names files or embeds base64 data; ssl wants files."""
    if data_b64:
        fd, name = tempfile.mkstemp(prefix="punctual-", suffix=suffix)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(data_b64))
        return name
    if path:
        return str((base / path).resolve())
    return None


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, context: str | None = None
) -> Credentials:
    """Credentials from a kubeconfig file ($KUBECONFIG's first entry or ~/.kube/config)."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = env.split(os.pathsep)[0] if env else Path.home() / ".kube" / "config"
    file = Path(path)
    config = yaml.safe_load(file.read_text())
    base = file.parent
    context_name = context or config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    if context_name not in contexts:
        raise ValueError(f"{file}: context {context_name!r} not found")
    ctx = contexts[context_name]
    cluster = {c["name"]: c["cluster"] for c in config.get("clusters", [])}[ctx["cluster"]]
    user = {u["name"]: u["user"] for u in config.get("users", [])}.get(ctx.get("user"), {})
    return Credentials(
        server=cluster["server"].rstrip("/"),
        ca_file=_materialize(
            cluster.get("certificate-authority-data"),
            cluster.get("certificate-authority"),
            base,
            ".crt",
        ),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        token=user.get("token"),
        token_file=str(base / user["tokenFile"]) if user.get("tokenFile") else None,
        cert_file=_materialize(
            user.get("client-certificate-data"), user.get("client-certificate"), base, ".crt"
        ),
        key_file=_materialize(user.get("client-key-data"), user.get("client-key"), base, ".key"),
        namespace=ctx.get("namespace", "default"),
    )


def load_incluster() -> Credentials:
    """Credentials of the pod's service account."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    return Credentials(
        server=f"https://{host}:{port}",
        ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        token_file=str(SERVICE_ACCOUNT_DIR / "token"),
        namespace=(SERVICE_ACCOUNT_DIR / "namespace").read_text().strip(),
    )


def load_credentials(kubeconfig: str | None = None) -> Credentials:
    """In-cluster when running in a pod and no kubeconfig is named; else the kubeconfig."""
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and SERVICE_ACCOUNT_DIR.exists():
        return load_incluster()
    return load_kubeconfig(kubeconfig)


MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class Api(Protocol):
    """What the writing shell needs of the API server: four verbs on paths.

    `KubeClient` is the real one; unit tests of the applier's order and error
    handling use a small recording fake of it (API semantics stay tested against the
    real control plane).
    """

    async def get(self, path: str, **params: str) -> Body: ...

    async def create(self, path: str, body: Body) -> Body: ...

    async def replace(self, path: str, body: Body) -> Body: ...

    async def delete(self, path: str, body: Body | None = None) -> Body: ...

    async def patch(self, path: str, body: Any, *, content_type: str = MERGE_PATCH) -> Body: ...


class KubeClient:
    """An async JSON client for one API server. Use as `async with KubeClient(creds) as api`."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        timeout: float = 30.0,
        user_agent: str = "punctual",
        server_clock: ServerClock | None = None,
        observer: Callable[[str, int], None] | None = None,
    ):
        self.credentials = credentials
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        # Every response's Date header refines the estimate of the API server's clock.
        self.server_clock = server_clock or ServerClock()
        self._observer = observer  # (verb, status code or 0) of every request, for metrics

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.credentials.ssl_context(), limit=100),
            timeout=self._timeout,
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Body:
        """Send one request; return the decoded JSON body or raise a classified ApiError."""
        if self._session is None:
            raise RuntimeError("KubeClient used outside `async with`")
        headers = {"Content-Type": content_type}
        token = self.credentials.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body) if body is not None else None
        sent = self.server_clock.local_now()
        try:
            async with self._session.request(
                method, self.credentials.server + path, data=data, params=params, headers=headers
            ) as resp:
                self._observe_date(sent, resp.headers.get("Date"))
                if self._observer is not None:
                    self._observer(method, resp.status)
                text = await resp.text()
                decoded: Body = (
                    json.loads(text) if text.strip().startswith("{") else {"message": text}
                )
                if resp.status >= 400:
                    raise _classify(resp.status, decoded)
                return decoded
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            if self._observer is not None:
                self._observer(method, 0)
            raise Unavailable(0, "Unreachable", f"{method} {path}: {exc!r}") from exc

    async def get(self, path: str, **params: str) -> Body:
        return await self.request("GET", path, params=params or None)

    async def create(self, path: str, body: Body) -> Body:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: Body) -> Body:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, *, content_type: str = MERGE_PATCH) -> Body:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, body: Body | None = None) -> Body:
        return await self.request("DELETE", path, body=body)

    def _observe_date(self, sent: datetime, header: str | None) -> None:
        if header:
            try:
                server_date = parsedate_to_datetime(header)
            except (TypeError, ValueError):
                return
            self.server_clock.observe(sent, self.server_clock.local_now(), server_date)
