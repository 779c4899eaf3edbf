"""Credentials from kubeconfigs and the service account, as kubectl would use them.

The kubeconfig is read by the official `kubernetes` client's loader; these tests pin
what Punctual adds and relies on: exec plugins (v1 and v1beta1, tokens and client
certificates) run once and renewed shortly before they expire or after a 401, the
oidc auth-provider, contexts and namespaces, tls-server-name and proxy-url honoured by
the client, rotating service-account tokens, and every unusable kubeconfig as one line.
Requests go to small local servers (HTTPS with a throwaway CA, or a plain HTTP proxy),
never to a cluster.
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kopf._core.intents.causes import Activity

from punctual.clocks import FixedClock
from punctual.kube.client import KubeClient, Unavailable
from punctual.kube.credentials import (
    MIN_RENEWAL_INTERVAL,
    CredentialsError,
    Issued,
    Issuer,
    load_credentials,
    load_incluster,
    load_kubeconfig,
)
from punctual.kube.watching import _login

EXPIRES = datetime(2030, 1, 1, tzinfo=UTC)
SERVER_NAME = "kubernetes.test"  # the only names in the test server's certificate: not
ALSO_NAMED = "localhost"  # 127.0.0.1, so tls-server-name is what makes it verify


# --- a throwaway PKI ---------------------------------------------------------------


@dataclass
class Pki:
    directory: Path
    ca_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    ca_cert: x509.Certificate | None = None

    def __post_init__(self) -> None:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
        self.ca_cert = (
            self._builder(name, self.ca_key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.ca_key, hashes.SHA256())
        )
        self.ca_file.write_bytes(self.ca_pem.encode())

    def _builder(self, subject: x509.Name, key: Any) -> x509.CertificateBuilder:
        issuer = self.ca_cert.subject if self.ca_cert is not None else subject
        now = datetime.now(UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=1))
        )

    @property
    def ca_pem(self) -> str:
        assert self.ca_cert is not None
        return self.ca_cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def issue(self, common_name: str, *dns_names: str) -> tuple[str, str]:
        """A certificate (PEM) and its key (PEM), for a server if named, else a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = self._builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]), key.public_key()
        )
        if dns_names:
            names = [x509.DNSName(n) for n in dns_names]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


# --- a local API server that tells what it was sent ---------------------------------


@dataclass
class FakeApiServer:
    """HTTPS on 127.0.0.1: answers every path with what authenticated the request."""

    port: int = 0
    names: list[str | None] = field(default_factory=list)  # SNI of each TLS handshake
    rejected: set[str] = field(default_factory=set)  # tokens answered with 401

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if auth.removeprefix("Bearer ") in self.rejected:
            return web.json_response({"kind": "Status", "reason": "Unauthorized"}, status=401)
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(pair[0] for pair in peer["subject"]) if peer else {}
        return web.json_response({"auth": auth, "client": subject.get("commonName")})


@pytest.fixture
async def server(pki: Pki) -> AsyncIterator[FakeApiServer]:
    fake = FakeApiServer()
    cert, key = pki.issue("apiserver", SERVER_NAME, ALSO_NAMED)
    (pki.directory / "server.crt").write_text(cert)
    (pki.directory / "server.key").write_text(key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_file))
    context.load_cert_chain(pki.directory / "server.crt", pki.directory / "server.key")
    context.verify_mode = ssl.CERT_OPTIONAL  # client certificates are asked for, not required
    # As a kube-apiserver (Go) does: no RFC 5280 strictness about the client certificate's
    # extensions, which Python 3.13's default context adds (the test PKI's have none).
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    context.sni_callback = lambda _obj, name, _ctx: fake.names.append(name)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    fake.port = runner.addresses[0][1]
    yield fake
    await runner.cleanup()


async def get(credentials: Any, path: str = "/version") -> dict[str, Any]:
    async with KubeClient(credentials) as api:
        return await api.get(path)


# --- kubeconfigs and exec plugins ---------------------------------------------------


def kubeconfig(
    path: Path,
    user: dict[str, Any],
    *,
    server: str = "https://127.0.0.1:6443",
    cluster: dict[str, Any] | None = None,
    namespace: str | None = None,
) -> Path:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": context}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def exec_plugin(
    directory: Path,
    *,
    api_version: str = "client.authentication.k8s.io/v1",
    expires: datetime | None = EXPIRES,
    certificates: list[tuple[str, str]] | None = None,
    exit_code: int = 0,
) -> tuple[dict[str, Any], Path]:
    """An exec plugin (a Python script) and the log it appends its every run to.

    Run N issues token-N (and the Nth certificate, if given), valid until `expires`.
    """
    log = directory / "plugin.log"
    script = directory / "plugin.py"
    stamp = expires.isoformat().replace("+00:00", "Z") if expires else None
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, pathlib, sys\n"
        f"log = pathlib.Path({str(log)!r})\n"
        "runs = len(log.read_text().splitlines()) + 1 if log.exists() else 1\n"
        "with log.open('a') as f:\n"
        "    f.write(os.environ['KUBERNETES_EXEC_INFO'] + '\\n')\n"
        f"if {exit_code}:\n"
        "    print('the identity provider said no', file=sys.stderr)\n"
        f"    sys.exit({exit_code})\n"
        "status = {'token': f'token-{runs}'}\n"
        f"certificates = {certificates or []!r}\n"
        "if certificates:\n"
        "    cert, key = certificates[min(runs, len(certificates)) - 1]\n"
        "    status = {'clientCertificateData': cert, 'clientKeyData': key}\n"
        f"if {stamp!r}:\n"
        f"    status['expirationTimestamp'] = {stamp!r}\n"
        f"print(json.dumps({{'apiVersion': {api_version!r}, 'kind': 'ExecCredential',"
        " 'status': status}))\n"
    )
    script.chmod(0o755)
    user = {"exec": {"apiVersion": api_version, "command": "./plugin.py", "args": ["get-token"]}}
    if api_version.endswith("/v1"):
        user["exec"]["interactiveMode"] = "Never"
    return user, log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


# --- plain kubeconfigs ---------------------------------------------------------------


def test_a_token_and_an_embedded_ca(tmp_path: Path, pki: Pki) -> None:
    ca_data = base64.b64encode(pki.ca_pem.encode()).decode()
    path = kubeconfig(
        tmp_path / "config", {"token": "t0ken"}, cluster={"certificate-authority-data": ca_data}
    )
    credentials = load_kubeconfig(path)
    assert credentials.server == "https://127.0.0.1:6443"
    assert credentials.bearer() == "t0ken"
    assert credentials.namespace == "default"
    assert credentials.ca_file is not None
    assert Path(credentials.ca_file).read_text() == pki.ca_pem
    assert credentials.ssl_context() is credentials.ssl_context()  # kept: connections pool


def test_contexts_pick_the_cluster_user_and_namespace(tmp_path: Path) -> None:
    config = {
        "clusters": [
            {"name": "prod", "cluster": {"server": "https://prod:6443"}},
            {"name": "dev", "cluster": {"server": "https://dev:6443/"}},
        ],
        "users": [
            {"name": "alice", "user": {"token": "a"}},
            {"name": "bob", "user": {"token": "b"}},
        ],
        "contexts": [
            {"name": "p", "context": {"cluster": "prod", "user": "alice", "namespace": "team-a"}},
            {"name": "d", "context": {"cluster": "dev", "user": "bob"}},
        ],
        "current-context": "p",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    current = load_kubeconfig(path)
    assert (current.server, current.bearer(), current.namespace) == (
        "https://prod:6443",
        "a",
        "team-a",
    )
    other = load_kubeconfig(path, context="d")
    assert (other.server, other.bearer(), other.namespace) == ("https://dev:6443", "b", "default")


def test_kubeconfig_lists_merge_and_the_first_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kubeconfig(tmp_path / "first", {"token": "first"}, namespace="one")
    second = kubeconfig(tmp_path / "second", {"token": "second"}, server="https://other:6443")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{first}:{second}")
    credentials = load_kubeconfig()
    assert (credentials.bearer(), credentials.namespace) == ("first", "one")


def test_relative_paths_are_relative_to_the_kubeconfig_and_token_files_are_reread(
    tmp_path: Path, pki: Pki
) -> None:
    directory = tmp_path / "kube"
    directory.mkdir()
    (directory / "ca.crt").write_text(pki.ca_pem)
    (directory / "token").write_text("first\n")
    path = kubeconfig(
        directory / "config", {"tokenFile": "token"}, cluster={"certificate-authority": "ca.crt"}
    )
    credentials = load_kubeconfig(path)
    assert credentials.ca_file == str(directory / "ca.crt")
    assert credentials.bearer() == "first"
    (directory / "token").write_text("second\n")
    assert credentials.bearer() == "second"


async def test_a_client_certificate_from_the_kubeconfig(
    tmp_path: Path, pki: Pki, server: FakeApiServer
) -> None:
    cert, key = pki.issue("kubeconfig-user")
    user = {
        "client-certificate-data": base64.b64encode(cert.encode()).decode(),
        "client-key-data": base64.b64encode(key.encode()).decode(),
    }
    cluster = {"certificate-authority": str(pki.ca_file), "tls-server-name": SERVER_NAME}
    credentials = load_kubeconfig(
        kubeconfig(tmp_path / "c", user, server=server.url, cluster=cluster)
    )
    assert credentials.cert_file is not None
    assert Path(credentials.cert_file).read_text() == cert
    assert await get(credentials) == {"auth": "", "client": "kubeconfig-user"}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"current-context": "nope"}, "nope"),
        ({"current-context": "ctx", "contexts": []}, "ctx"),
        ({"users": []}, "user 'u' of context 'ctx' not found"),
    ],
)
def test_an_unknown_context_or_user_is_one_line(
    tmp_path: Path, config: dict[str, Any], expected: str
) -> None:
    path = kubeconfig(tmp_path / "config", {"token": "t"})
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **config}))
    with pytest.raises(CredentialsError) as raised:
        load_kubeconfig(path)
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match=r"no kubeconfig at .*absent"):
        load_kubeconfig(tmp_path / "absent")


@pytest.mark.parametrize(
    ("user", "cluster", "expected"),
    [
        ({"username": "u", "password": "p"}, {}, "basic auth"),
        ({"auth-provider": {"name": "gcp", "config": {}}}, {}, "'gcp' is not supported"),
        ({"token": "t"}, {"proxy-url": "socks5://127.0.0.1:1080"}, "only http:// and https://"),
        ({"token": "t", "client-certificate": "absent.crt"}, {}, "does not exist"),
    ],
)
def test_what_cannot_be_used_is_refused_in_one_line(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], expected: str
) -> None:
    with pytest.raises(CredentialsError, match=expected) as raised:
        load_kubeconfig(kubeconfig(tmp_path / "config", user, cluster=cluster))
    assert "\n" not in str(raised.value)


# --- exec plugins --------------------------------------------------------------------


@pytest.mark.parametrize(
    "api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
def test_an_exec_token_is_cached_until_shortly_before_it_expires(
    tmp_path: Path, api_version: str
) -> None:
    user, log = exec_plugin(tmp_path, api_version=api_version)
    clock = FixedClock(EXPIRES - timedelta(minutes=15))
    credentials = load_kubeconfig(kubeconfig(tmp_path / "config", user), clock=clock)
    assert runs(log) == 1  # run at load: a plugin that fails, fails there
    info = json.loads(log.read_text().splitlines()[0])
    assert (info["apiVersion"], info["kind"]) == (api_version, "ExecCredential")
    assert credentials.bearer() == "token-1"
    clock.advance(13 * 60)  # two minutes left
    assert credentials.bearer() == "token-1"
    assert runs(log) == 1
    clock.advance(65)  # under a minute left: renewed
    assert credentials.bearer() == "token-2"
    assert credentials.bearer() == "token-2"
    assert runs(log) == 2


def test_the_renewal_margin_is_a_minute_or_a_fifth_of_a_short_life() -> None:
    clock = FixedClock(EXPIRES - timedelta(hours=1))
    lifetimes = iter([timedelta(hours=1), timedelta(seconds=100), timedelta(seconds=-30)])
    issuer = Issuer(lambda: Issued(token="t", expires=clock.now() + next(lifetimes)), clock=clock)
    start = clock.now()
    assert issuer.current().renew_at == start + timedelta(minutes=59)
    clock.instant = start + timedelta(minutes=59)
    assert issuer.current().renew_at == clock.now() + timedelta(seconds=80)
    clock.advance(80)  # already expired when issued: not asked again at once
    assert issuer.current().renew_at == clock.now() + MIN_RENEWAL_INTERVAL


def test_a_failing_renewal_is_not_retried_at_once() -> None:
    clock = FixedClock(EXPIRES)
    calls: list[int] = []

    def fail() -> Issued:
        calls.append(1)
        raise CredentialsError("no")

    issuer = Issuer(fail, clock=clock)
    for _ in range(3):
        with pytest.raises(CredentialsError):
            issuer.current()
    assert len(calls) == 1
    clock.advance(MIN_RENEWAL_INTERVAL.total_seconds())
    with pytest.raises(CredentialsError):
        issuer.current()
    assert len(calls) == 2


async def test_an_exec_token_that_the_server_rejects_is_renewed_once(
    tmp_path: Path, pki: Pki, server: FakeApiServer
) -> None:
    user, log = exec_plugin(tmp_path, expires=None)  # no expiry: cached until a 401
    cluster = {"certificate-authority": str(pki.ca_file), "tls-server-name": SERVER_NAME}
    credentials = load_kubeconfig(
        kubeconfig(tmp_path / "c", user, server=server.url, cluster=cluster)
    )
    server.rejected.add("token-1")
    assert (await get(credentials))["auth"] == "Bearer token-2"
    assert runs(log) == 2
    server.rejected.add("token-2")
    server.rejected.add("token-3")
    with pytest.raises(Exception, match="401"):  # retried once, not forever
        await get(credentials)
    assert runs(log) == 3


async def test_an_exec_client_certificate_is_used_and_renewed(
    tmp_path: Path, pki: Pki, server: FakeApiServer
) -> None:
    certificates = [pki.issue("plugin-1"), pki.issue("plugin-2")]
    user, log = exec_plugin(tmp_path, certificates=certificates)
    cluster = {"certificate-authority": str(pki.ca_file), "tls-server-name": SERVER_NAME}
    clock = FixedClock(EXPIRES - timedelta(minutes=15))
    path = kubeconfig(tmp_path / "c", user, server=server.url, cluster=cluster)
    credentials = load_kubeconfig(path, clock=clock)
    async with KubeClient(credentials) as api:
        assert await api.get("/version") == {"auth": "", "client": "plugin-1"}
        clock.advance(14.5 * 60)
        assert await api.get("/version") == {"auth": "", "client": "plugin-2"}  # new connection
    assert runs(log) == 2


def test_an_exec_plugin_that_fails_is_one_line_with_its_stderr(tmp_path: Path) -> None:
    user, _log = exec_plugin(tmp_path, exit_code=1)
    with pytest.raises(CredentialsError) as raised:
        load_kubeconfig(kubeconfig(tmp_path / "config", user))
    message = str(raised.value)
    assert message == (
        "exec plugin './plugin.py': process returned 1. the identity provider said no"
    )


def test_an_exec_plugin_that_is_not_installed_says_its_install_hint(tmp_path: Path) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "punctual-no-such-plugin",
            "installHint": "Install it\nwith the package manager.",
        }
    }
    with pytest.raises(CredentialsError) as raised:
        load_kubeconfig(kubeconfig(tmp_path / "config", user))
    assert str(raised.value) == (
        "exec plugin 'punctual-no-such-plugin' not found: Install it with the package manager."
    )


def test_an_exec_plugin_that_prints_garbage_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "plugin.sh"
    script.write_text("#!/bin/sh\necho 'not json'\n")
    script.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}}
    with pytest.raises(CredentialsError, match="failed to decode process output") as raised:
        load_kubeconfig(kubeconfig(tmp_path / "config", user))
    assert "\n" not in str(raised.value)


async def test_a_renewal_that_fails_later_is_an_unavailable_api(
    tmp_path: Path, pki: Pki, server: FakeApiServer
) -> None:
    user, _log = exec_plugin(tmp_path)
    cluster = {"certificate-authority": str(pki.ca_file), "tls-server-name": SERVER_NAME}
    clock = FixedClock(EXPIRES - timedelta(minutes=15))
    path = kubeconfig(tmp_path / "c", user, server=server.url, cluster=cluster)
    credentials = load_kubeconfig(path, clock=clock)
    (tmp_path / "plugin.py").write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    clock.advance(15 * 60)
    with pytest.raises(Unavailable, match=r"process returned 3\. broken"):
        await get(credentials)


# --- auth-provider ---------------------------------------------------------------------


def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_an_oidc_id_token_is_the_bearer_until_it_is_due(tmp_path: Path) -> None:
    token = jwt({"iss": "https://idp.test", "exp": int(EXPIRES.timestamp())})
    user = {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "idp-issuer-url": "https://idp.test",
                "client-id": "punctual",
                "id-token": token,
                "refresh-token": "r",
            },
        }
    }
    clock = FixedClock(EXPIRES - timedelta(hours=1))
    credentials = load_kubeconfig(kubeconfig(tmp_path / "config", user), clock=clock)
    assert credentials.bearer() == token
    assert credentials.issuer is not None
    issued = credentials.issuer.current()
    assert issued.expires == EXPIRES
    assert issued.renew_at == EXPIRES - timedelta(minutes=1)


# --- tls-server-name and proxy-url -----------------------------------------------------


async def test_tls_server_name_is_the_name_checked_and_sent(
    tmp_path: Path, pki: Pki, server: FakeApiServer
) -> None:
    cluster: dict[str, Any] = {"certificate-authority": str(pki.ca_file)}
    plain = load_kubeconfig(
        kubeconfig(tmp_path / "a", {"token": "t"}, server=server.url, cluster=cluster)
    )
    with pytest.raises(Unavailable, match="certificate"):  # 127.0.0.1 is not in the certificate
        await get(plain)
    cluster["tls-server-name"] = SERVER_NAME
    named = load_kubeconfig(
        kubeconfig(tmp_path / "b", {"token": "t"}, server=server.url, cluster=cluster)
    )
    assert named.tls_server_name == SERVER_NAME
    assert await get(named) == {"auth": "Bearer t", "client": None}
    assert server.names[-1] == SERVER_NAME


async def test_proxy_url_carries_every_request(tmp_path: Path) -> None:
    seen: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.url} {request.headers.get('Authorization')}")
        return web.json_response({"kind": "Status"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        port = runner.addresses[0][1]
        path = kubeconfig(
            tmp_path / "config",
            {"token": "t"},
            server="http://kubernetes.invalid",  # resolvable only by the proxy
            cluster={"proxy-url": f"http://127.0.0.1:{port}"},
        )
        credentials = load_kubeconfig(path)
        assert credentials.proxy == f"http://127.0.0.1:{port}"
        assert await get(credentials, "/api/v1/namespaces") == {"kind": "Status"}
    finally:
        await runner.cleanup()
    assert seen == ["GET http://kubernetes.invalid/api/v1/namespaces Bearer t"]


# --- the in-cluster service account ----------------------------------------------------


@pytest.fixture
def service_account(tmp_path: Path, pki: Pki) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "ca.crt").write_text(pki.ca_pem)
    (directory / "token").write_text("first")
    (directory / "namespace").write_text("punctual-system\n")
    return directory


async def test_in_cluster_tokens_are_reread_as_they_rotate(
    service_account: Path, server: FakeApiServer
) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": ALSO_NAMED, "KUBERNETES_SERVICE_PORT": str(server.port)}
    credentials = load_incluster(service_account, environ)
    assert credentials.server == f"https://{ALSO_NAMED}:{server.port}"
    assert credentials.namespace == "punctual-system"
    async with KubeClient(credentials) as api:
        assert (await api.get("/version"))["auth"] == "Bearer first"
        (service_account / "token").write_text("second")
        assert (await api.get("/version"))["auth"] == "Bearer second"


def test_in_cluster_when_no_kubeconfig_is_named(
    service_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    credentials = load_credentials(service_account_dir=service_account)
    assert credentials.server == "https://[fd00::1]:443"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(CredentialsError, match="in-cluster service account: Service host/port"):
        load_credentials(service_account_dir=service_account)


# --- kopf's login ----------------------------------------------------------------------


def login_handler(credentials: Any) -> Callable[..., Any]:
    registry = kopf.OperatorRegistry()
    _login(registry, credentials)
    [handler] = registry._activities.get_handlers(activity=Activity.AUTHENTICATION)
    return handler.fn


async def test_kopf_logs_in_with_the_plugins_current_token_and_renews_on_asking_again(
    tmp_path: Path,
) -> None:
    user, log = exec_plugin(tmp_path)
    clock = FixedClock(EXPIRES - timedelta(minutes=15))
    credentials = load_kubeconfig(kubeconfig(tmp_path / "config", user), clock=clock)
    login = login_handler(credentials)
    first = await login()
    assert isinstance(first, kopf.ConnectionInfo)
    assert (first.token, first.expiration) == ("token-1", EXPIRES - timedelta(minutes=1))
    second = await login()  # kopf asks again after a 401: the plugin runs again
    assert second.token == "token-2"
    assert runs(log) == 2


async def test_kopf_gets_the_plugins_client_certificate(tmp_path: Path, pki: Pki) -> None:
    cert, key = pki.issue("plugin-1")
    user, _log = exec_plugin(tmp_path, certificates=[(cert, key)])
    info = await login_handler(load_kubeconfig(kubeconfig(tmp_path / "config", user)))()
    assert (info.token, info.certificate_data, info.private_key_data) == (None, cert, key)
    assert info.certificate_path is None


async def test_kopf_gets_a_session_that_names_the_tls_server(tmp_path: Path, pki: Pki) -> None:
    cluster = {
        "certificate-authority": str(pki.ca_file),
        "tls-server-name": SERVER_NAME,
        "proxy-url": "http://127.0.0.1:3128",
    }
    credentials = load_kubeconfig(kubeconfig(tmp_path / "config", {"token": "t"}, cluster=cluster))
    info = await login_handler(credentials)()
    assert isinstance(info, kopf.AiohttpSession)
    try:
        assert info.aiohttp_session.headers["Authorization"] == "Bearer t"
        assert info.aiohttp_session.connector is not None
        assert info.server == "https://127.0.0.1:6443"
    finally:
        await info.aiohttp_session.close()
