"""Where the API server is and how to authenticate to it, for as long as the process runs.

Credentials are not read by hand: the official `kubernetes` client's config loading
reads kubeconfigs as kubectl does (merged files, contexts and namespaces, tokens and
token files, client certificates, proxy-url, tls-server-name, the oidc auth-provider,
exec plugins) and the in-cluster service account. What it lacks for a long-running
process is added here: an exec plugin's or auth-provider's credential is cached and
renewed shortly before it expires, or after a 401, off the event loop; a plugin's
client certificate is used and renewed too; a failure is one line (CredentialsError).
Both Punctual's client (`kube.client`) and kopf's login (`kube.watching`) authenticate
from one `Credentials`, so they renew one credential, not two.

What it must never do: send a request to the API server (it says how to authenticate;
`kube.client` sends), or, once loaded, block the event loop on a credential program:
renewals run in a worker thread, while the loop goes on renewing the leader Lease.
"""

# Over 500 lines because it is one concern: the kubeconfig loader, the credential
# programs and their renewal share `Issued` and `CredentialsError`, and split apart
# each part would be read only with the others.
# The kubernetes package's config loading is unannotated; calling it is expected here.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.exec_provider import ExecProvider
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

from punctual.clocks import Clock, SystemClock

logger = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


# An issued credential (exec plugin, auth-provider) is renewed this long before it
# expires, or a fifth of its lifetime before if that is sooner...
RENEW_MARGIN = timedelta(seconds=60)
# ...and its program runs no more often than this, even when what it issues has already
# expired or when it fails: a broken plugin must not run once per request.
MIN_RENEWAL_INTERVAL = timedelta(seconds=5)


class CredentialsError(ValueError):
    """A kubeconfig, service account or credential plugin that gives no usable credentials.

    Its message is one line, for `punctual: cannot load credentials: ...`.
    """


@dataclass(frozen=True)
class Issued:
    """What an exec plugin or auth-provider issued: a bearer token, a client certificate, or both.

    `renew_at` is when to ask for a new one, shortly before `expires`; None when it does
    not expire, and then only the API server's 401 replaces it (as with kubectl).
    """

    token: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    expires: datetime | None = None
    renew_at: datetime | None = None


def _renewal(issued_at: datetime, expires: datetime | None) -> datetime | None:
    if expires is None:
        return None
    margin = min(RENEW_MARGIN, (expires - issued_at) / 5)
    return max(expires - margin, issued_at + MIN_RENEWAL_INTERVAL)


class Issuer:
    """A credential program (an exec plugin, an auth-provider) and what it last issued.

    The program runs when a credential is first wanted, again once it is due for renewal,
    and again after the API server rejected it (`forget`). kopf's login handler and the
    KubeClient ask from different threads: one run at a time, and whoever waited gets its
    result. A failure is re-raised without running the program again for
    MIN_RENEWAL_INTERVAL.
    """

    def __init__(self, issue: Callable[[], Issued], *, clock: Clock | None = None) -> None:
        self._issue = issue
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._current: Issued | None = None
        self._failure: tuple[datetime, CredentialsError] | None = None

    def cached(self) -> Issued | None:
        """The credential if it is not due for renewal; None if the program must run.

        Never blocks, never runs the program.
        """
        current = self._current
        if current is None or (current.renew_at and self._clock.now() >= current.renew_at):
            return None
        return current

    def current(self) -> Issued:
        """The cached credential, or a new one from the program (blocks while it runs)."""
        with self._lock:
            cached = self.cached()
            if cached is not None:
                return cached
            now = self._clock.now()
            if self._failure is not None and now < self._failure[0] + MIN_RENEWAL_INTERVAL:
                raise self._failure[1]
            try:
                issued = self._issue()
            except CredentialsError as error:
                self._failure = (now, error)
                raise
            self._failure = None
            self._current = replace(issued, renew_at=_renewal(now, issued.expires))
            return self._current

    def forget(self, issued: Issued) -> None:
        """The API server rejected `issued` (401): the next `current()` runs the program."""
        with self._lock:
            if self._current is issued:
                self._current = None


class _NamedServerContext(ssl.SSLContext):
    """A client TLS context that sends and checks one server name, whatever host it dials.

    A kubeconfig's tls-server-name. aiohttp takes a server_hostname per request, but
    kopf's sessions cannot be given one; asyncio wraps every TLS connection (direct, or
    through a proxy's CONNECT tunnel) with `wrap_bio`, so a context that names the server
    there serves Punctual's client and kopf's alike.
    """

    server_name: str = ""

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        name = self.server_name or server_hostname
        return super().wrap_bio(incoming, outgoing, server_side, name, session)


def _load_pem_chain(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    """ssl loads a client certificate only from files: a private directory, for a moment."""
    with tempfile.TemporaryDirectory(prefix="punctual-") as directory:  # mode 0700
        cert, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert.write_text(cert_pem)
        key.write_text(key_pem)
        context.load_cert_chain(cert, key)


@dataclass(frozen=True)
class Auth:
    """What one request authenticates with: its bearer token and TLS context."""

    token: str | None
    tls: ssl.SSLContext
    issued: Issued | None = None


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate to it.

    The bearer token comes from the first of: `issuer` (an exec plugin or auth-provider,
    renewed before it expires), `token_file` (re-read at every use: projected
    service-account tokens rotate), `token`. The client certificate is the issuer's if it
    gives one, else `cert_file`/`key_file`.
    """

    server: str
    ca_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    namespace: str = "default"
    proxy: str | None = None  # the cluster's proxy-url (http:// or https://)
    tls_server_name: str | None = None  # the name the server's certificate is checked for
    issuer: Issuer | None = field(default=None, compare=False, repr=False)
    _tls: dict[tuple[str, str] | None, ssl.SSLContext] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def bearer(self, issued: Issued | None = None) -> str | None:
        """The bearer token to send now; runs the issuer's program if its credential is due."""
        if self.issuer is not None:
            token = (issued or self.issuer.current()).token
            if token:
                return token
        if self.token_file:
            return Path(self.token_file).read_text().strip()  # re-read: projected tokens rotate
        return self.token

    def ssl_context(self, issued: Issued | None = None) -> ssl.SSLContext:
        """The TLS context, with `issued`'s client certificate if it carries one.

        One context per certificate, kept: requests with the same context share pooled
        connections, and a renewed certificate gets a new context, hence new connections
        (a server checks a client certificate when a connection opens).
        """
        pair = None
        if issued is not None and issued.cert_pem and issued.key_pem:
            pair = (issued.cert_pem, issued.key_pem)
        context = self._tls.get(pair)
        if context is None:
            if pair is not None:
                for old in [key for key in self._tls if key is not None]:
                    del self._tls[old]
            context = self._tls[pair] = self._new_ssl_context(pair)
        return context

    def _new_ssl_context(self, pair: tuple[str, str] | None) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the server and its name
        if self.tls_server_name:
            context = _NamedServerContext(ssl.PROTOCOL_TLS_CLIENT)
            context.server_name = self.tls_server_name
        if self.ca_file:
            context.load_verify_locations(self.ca_file)
        else:
            context.load_default_certs()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if pair is not None:
            _load_pem_chain(context, *pair)
        elif self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    async def authenticate(self) -> Auth:
        """The token and TLS context for the next request.

        A credential due for renewal is renewed in a worker thread: an exec plugin may
        take seconds, and the event loop it would block renews the leader Lease.
        """
        issued = None
        if self.issuer is not None:
            issued = self.issuer.cached() or await asyncio.to_thread(self.issuer.current)
        return Auth(self.bearer(issued), self.ssl_context(issued), issued)

    def reject(self, auth: Auth) -> bool:
        """The API server answered 401 to `auth`: True if a renewed credential may do better."""
        if self.issuer is None or auth.issued is None:
            return False
        self.issuer.forget(auth.issued)
        return True


def _one_line(error: BaseException) -> str:
    message = " ".join(str(error).split())
    if isinstance(error, ConfigException | CredentialsError | OSError) and message:
        return message
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


class _Loader(KubeConfigLoader):
    """The official client's kubeconfig loader, with exec plugins left to an `Issuer`.

    The library would run a plugin once, here, log its failure and go on without
    credentials (kubectl stops with the plugin's error), and it renews only tokens, five
    minutes before they expire, on its own clock. Here it only builds the plugin's
    ExecProvider (the library's, which runs the plugin as kubectl does: args, env,
    provideClusterInfo, KUBERNETES_EXEC_INFO); the Issuer decides when it runs. This
    overrides one private method, `_load_from_exec_plugin`, which the library calls after
    auth-provider and token have found nothing (tests/unit/test_credentials.py pins it).
    """

    exec_provider: ExecProvider | None = None

    _user: Any  # the library's ConfigNodes
    _cluster: Any

    def _load_from_exec_plugin(self) -> bool | None:
        if "exec" not in self._user:
            return None
        base = self._get_base_path(self._cluster.path)
        self.exec_provider = ExecProvider(self._user["exec"], base, self._cluster)
        return True

    @property
    def user(self) -> dict[str, Any]:
        named = self.current_context["context"].get("user")
        if named and self._user is None:  # the library would go on anonymous
            raise CredentialsError(
                f"user {named!r} of context {self.current_context['name']!r} not found"
            )
        return dict(self._user.value) if self._user else {}

    @property
    def user_dir(self) -> str:
        return str(self._get_base_path(self._user.path)) if self._user else ""

    @property
    def server(self) -> str:
        return str(self._cluster.safe_get("server") or "")

    @property
    def namespace(self) -> str:
        return str(self.current_context["context"].get("namespace") or "default")


def _exec_issue(provider: ExecProvider, exec_config: Mapping[str, Any]) -> Callable[[], Issued]:
    """Run an exec plugin; its ExecCredential status as an `Issued`."""
    command = str(exec_config.get("command"))

    def issue() -> Issued:
        try:
            status = provider.run()
            token, cert, key = (
                status.get(name) or None
                for name in ("token", "clientCertificateData", "clientKeyData")
            )
            if bool(cert) != bool(key):
                raise CredentialsError("clientCertificateData and clientKeyData come together")
            if not token and not cert:
                raise CredentialsError("its ExecCredential has neither token nor certificate")
            expires = status.get("expirationTimestamp")
            return Issued(token, cert, key, _rfc3339(expires) if expires else None)
        except FileNotFoundError:
            hint = " ".join(str(exec_config.get("installHint") or "").split())
            raise CredentialsError(
                f"exec plugin {command!r} not found" + (f": {hint}" if hint else "")
            ) from None
        except Exception as error:  # the plugin's exit status and stderr, or its bad output
            message = _one_line(error).removeprefix("exec: ")
            raise CredentialsError(f"exec plugin {command!r}: {message}") from error

    return issue


def _oidc_issue(loader: _Loader) -> Callable[[], Issued]:
    """The oidc auth-provider's id-token; the library renews it with the refresh token.

    kubectl writes renewed tokens back into the kubeconfig; so does the library, given
    the persister `_load_kubeconfig` passes.
    """

    def issue() -> Issued:
        configuration = Configuration()
        try:
            loader.load_and_set(configuration)
        except Exception as error:
            raise CredentialsError(f"auth-provider oidc: {_one_line(error)}") from error
        token = _without_scheme(configuration.api_key.get("BearerToken"))
        if not token:
            raise CredentialsError("auth-provider oidc: its id-token is not a JWT")
        return Issued(token=token, expires=_jwt_expiry(token))

    return issue


def _rfc3339(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _jwt_expiry(token: str) -> datetime | None:
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return datetime.fromtimestamp(float(claims["exp"]), UTC)
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def _without_scheme(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        raise CredentialsError("username and password (basic auth) are not supported")
    return token.strip() or None


def _proxy(url: str | None) -> str | None:
    if url and urlsplit(url).scheme not in ("http", "https"):
        raise CredentialsError(f"proxy-url {url}: only http:// and https:// proxies work")
    return url or None


def _persister(merger: KubeConfigMerger) -> Callable[[], None]:
    def persist() -> None:
        try:
            merger.save_changes()
        except OSError as error:  # a read-only kubeconfig: the renewed tokens stay in memory
            logger.warning("cannot save renewed oidc tokens to the kubeconfig: %s", error)

    return persist


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    clock: Clock | None = None,
) -> Credentials:
    """Credentials from a kubeconfig, read as kubectl reads it, by the official client's loader.

    `path` may list several files as $KUBECONFIG does (merged; the first to define a
    name wins); unset, $KUBECONFIG or ~/.kube/config. The current context, or `context`,
    picks the cluster, the user and the namespace. An exec plugin runs now, so that one
    that fails fails here. Anything unusable raises CredentialsError with one line.
    """
    if path is not None:
        paths = os.fspath(path)
    else:
        paths = os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        return _load_kubeconfig(paths, context, clock)
    except CredentialsError:
        raise
    except Exception as error:  # the loader's ConfigException, KeyError, YAMLError...
        raise CredentialsError(_one_line(error)) from error


def _load_kubeconfig(paths: str, context: str | None, clock: Clock | None) -> Credentials:
    merger = KubeConfigMerger(paths)
    if merger.config is None:
        raise CredentialsError(f"no kubeconfig at {paths}")
    loader = _Loader(
        merger.config,
        active_context=context,
        config_base_path=None,  # relative paths are relative to the file that names them
        config_persister=_persister(merger),
    )
    user = loader.user
    provider = (user.get("auth-provider") or {}).get("name")
    if provider is not None and provider != "oidc":
        raise CredentialsError(
            f"auth-provider {provider!r} is not supported (nor by kubectl since 1.26); "
            "use its exec plugin"
        )
    configuration = Configuration()
    loader.load_and_set(configuration)
    if not loader.server:
        raise CredentialsError("the context's cluster has no server")
    issuer = None
    if provider == "oidc":
        issuer = Issuer(_oidc_issue(loader), clock=clock)
    elif loader.exec_provider is not None:
        issuer = Issuer(_exec_issue(loader.exec_provider, user["exec"]), clock=clock)
    token_file = None
    if issuer is None and user.get("tokenFile") and not user.get("token"):
        token_file = os.path.join(loader.user_dir, user["tokenFile"])  # re-read at every use
    credentials = Credentials(
        server=configuration.host,
        ca_file=configuration.ssl_ca_cert,
        token=None if issuer else _without_scheme(configuration.api_key.get("BearerToken")),
        token_file=token_file,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        insecure=not configuration.verify_ssl,
        namespace=loader.namespace,
        proxy=_proxy(configuration.proxy),
        tls_server_name=configuration.tls_server_name or None,
        issuer=issuer,
    )
    if issuer is not None:
        issuer.current()  # a plugin that fails makes loading fail, in one line
    return credentials


def load_incluster(
    directory: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> Credentials:
    """Credentials of the pod's service account (`directory` is its mount).

    The token is re-read from its file at every use: the kubelet rotates projected tokens.
    """
    token_file, ca_file = directory / "token", directory / "ca.crt"
    loader = InClusterConfigLoader(
        token_filename=str(token_file),
        cert_filename=str(ca_file),
        environ=os.environ if environ is None else environ,
    )
    configuration = Configuration()
    try:
        loader.load_and_set(configuration)
        namespace = (directory / "namespace").read_text().strip()
    except (ConfigException, OSError) as error:
        raise CredentialsError(f"in-cluster service account: {_one_line(error)}") from None
    return Credentials(
        server=configuration.host,
        ca_file=configuration.ssl_ca_cert,
        token_file=str(token_file),
        namespace=namespace or "default",
    )


def load_credentials(
    kubeconfig: str | None = None, *, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> Credentials:
    """In-cluster when running in a pod and no kubeconfig is named; else the kubeconfig."""
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and service_account_dir.exists():
        return load_incluster(service_account_dir)
    return load_kubeconfig(kubeconfig)
