"""A real Kubernetes control plane on loopback, from binaries built by build-binaries.sh.

Punctual's promises are about the API server (409s, resourceVersion, Leases, the Job
controller), so its tests run against the real thing: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok (fake nodes whose pods run to
completion without a container runtime), and, when run as root on Linux, one real node
(containerd, kubelet, kube-proxy: realnode.py) where the chart's image runs as pods. This
module starts them in the background with their state under one directory, and stops
exactly the processes it started, by pid, never by name. It never fakes a component.

Used by `make cluster-up` / `make cluster-down` (as a script) and by the pytest
fixture (as a module). Each component can be stopped and started on its own, so fault
tests can restart the API server or etcd under a running operator.

    python e2e/localcluster.py up   [--state-dir .cluster] [--port-base 16443] [--nodes 1]
                                    [--real-node | --no-real-node]
    python e2e/localcluster.py down [--state-dir .cluster]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import hoststate
import realnode

if TYPE_CHECKING:  # imported where used, so that free_port() needs no cryptography
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
    from cryptography.x509 import Certificate

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_STATE_DIR = REPO / ".cluster"
DEFAULT_PORT_BASE = 16443
# How long a fake pod "runs" before kwok marks it Succeeded, unless its pod template
# carries the annotation pod-complete.stage.kwok.x-k8s.io/delay (milliseconds, or a
# Go duration such as "5s").
DEFAULT_POD_RUN_MILLISECONDS = 1000
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
ALL_COMPONENTS = COMPONENTS + realnode.COMPONENTS
IMAGE_CACHE = Path(os.environ.get("PUNCTUAL_CACHE", Path.home() / ".cache" / "punctual")) / "images"
KUBECONFIG_NAME = "kubeconfig"

MANIFESTS = HERE / "manifests"
# The documents the components read, kept as files beside this module:
# - audit-policy.yaml: the API server's audit policy. The ground truth for "exactly one
#   create per tick" and "writes per firing" (bench/cluster.py widens it for the bench).
# - kwok-pod-stages.yaml: pod lifecycle on kwok's fake nodes. kwok uses no default stages
#   at all when given a config file, so node stages and all four pod stages are given:
#   scheduled -> Running -> Succeeded (or Failed when the pod asks for it), and deletion.
#   ${run_ms} is the pod's run time in milliseconds.
# - kwok-node-stages.yaml: a fake node's Ready status, and its heartbeats.
# - kwok-node.yaml: one fake node; ${name} is its name.
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def manifest(file: str, /, **values: object) -> str:
    """The text of e2e/manifests/<file> with each ${key} replaced by str(values[key]).

    Every placeholder must be given a value and every value must have a placeholder, so
    a renamed placeholder fails here rather than reaching a component as "${...}".
    """
    text = (MANIFESTS / file).read_text()
    wanted = set(_PLACEHOLDER.findall(text))
    if wanted != set(values):
        raise ValueError(f"{file} has placeholders {sorted(wanted)}, given {sorted(values)}")
    return _PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), text)


def audit_policy() -> str:
    """The audit policy every local cluster's API server runs with."""
    return manifest("audit-policy.yaml")


def kwok_stages(pod_run_milliseconds: int) -> str:
    """kwok's configuration: the pod stages, then the node stages."""
    pods = manifest("kwok-pod-stages.yaml", run_ms=pod_run_milliseconds)
    return pods + "---\n" + manifest("kwok-node-stages.yaml")


@dataclass
class Ports:
    """Every port a cluster listens on, derived from one base so two clusters can coexist."""

    base: int

    @property
    def apiserver(self) -> int:
        return self.base

    @property
    def etcd_client(self) -> int:
        return self.base + 1

    @property
    def etcd_peer(self) -> int:
        return self.base + 2

    @property
    def controller_manager(self) -> int:
        return self.base + 3

    @property
    def scheduler(self) -> int:
        return self.base + 4

    @property
    def kwok(self) -> int:
        return self.base + 5

    @property
    def node(self) -> tuple[int, int, int, int]:
        """The real node's kubelet, kubelet healthz, kube-proxy healthz and metrics ports."""
        return (self.base + 6, self.base + 7, self.base + 8, self.base + 9)


@dataclass
class LocalCluster:
    """The processes of one local control plane and the files they share."""

    state_dir: Path = DEFAULT_STATE_DIR
    port_base: int = DEFAULT_PORT_BASE
    bin_dir: Path | None = None
    nodes: int = 1
    pod_run_milliseconds: int = DEFAULT_POD_RUN_MILLISECONDS
    # A real node beside the kwok ones; None: whatever the state directory says (a
    # cluster started with one keeps it), so loaders of a running cluster need not know.
    real_node: bool | None = None
    pids: dict[str, int] = field(default_factory=dict)
    _kwok_revivals: int = field(default=0, init=False, repr=False)

    # -- paths -------------------------------------------------------------------------

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir).resolve()
        if self.bin_dir is None:
            self.bin_dir = self.state_dir / "bin"
        self.ports = Ports(self.port_base)
        if self.real_node is None:
            self.real_node = (self.state_dir / "node" / "host-before.json").exists()
        self.node = realnode.RealNode(
            self.state_dir / "node", api_port=self.ports.apiserver, ports=self.ports.node
        )

    @property
    def components(self) -> tuple[str, ...]:
        return ALL_COMPONENTS if self.real_node else COMPONENTS

    @property
    def host(self) -> str:
        """The API server's address: loopback, or the real node's bridge gateway."""
        return realnode.GATEWAY if self.real_node else "127.0.0.1"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / KUBECONFIG_NAME

    @property
    def audit_log(self) -> Path:
        return self.state_dir / "audit.log"

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self.ports.apiserver}"

    def binary(self, name: str) -> str:
        assert self.bin_dir is not None
        path = self.bin_dir / name
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run e2e/build-binaries.sh {self.bin_dir}")
        return str(path)

    def _path(self, *parts: str) -> str:
        return str(self.state_dir.joinpath(*parts))

    # -- lifecycle ---------------------------------------------------------------------

    def up(self, timeout: float = 90.0) -> None:
        """Start every component and wait until the API server serves and a node is Ready."""
        if self._pid_file.exists():
            self._load_pids()
            alive = [name for name, pid in self.pids.items() if _alive(pid)]
            if alive:
                raise RuntimeError(
                    f"a cluster already runs from {self.state_dir} ({', '.join(alive)}); "
                    "run `make cluster-down` first"
                )
        for sub in ("pki", "logs", "etcd"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        if self.real_node:
            self._reclaim_abandoned_node()
            self.node.prepare(self.state_dir / "pki", self._write_client_cert)
        self._write_credentials()
        self._write_configs()
        self.start("etcd")
        self.start("kube-apiserver")
        self.wait_ready(deadline - time.monotonic())
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            self.start(name)
        self._create_nodes()
        if self.real_node:
            self._start_real_node()
        self._wait_node_ready(deadline - time.monotonic())

    def _reclaim_abandoned_node(self) -> None:
        """Undo the host changes of a real node whose cluster no longer runs (killed
        without `make cluster-down`: a CI job or a session cut short), as its own
        cluster-down would, so that this clone can start one. A node with any process
        alive is left alone, and `prepare` refuses to start a second."""
        owner = realnode.recorded_owner() if realnode.another_node_runs() else None
        if owner is None:
            return
        state_dir, before = owner
        other = LocalCluster(state_dir=state_dir, real_node=True)
        other._load_pids()
        if any(_alive(pid) for pid in other.pids.values()) or hoststate.node_processes(
            other.node.dir
        ):
            return
        print(f"cluster-up: undoing the real node {state_dir} left when it was killed")
        left = other.node.restore_host(before)
        if left:
            raise HostNotRestored(left)
        # Its clone's own cluster-down must not undo this clone's node against that ledger.
        other.node.ledger.unlink(missing_ok=True)
        other._pid_file.unlink(missing_ok=True)

    def _start_real_node(self) -> None:
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "punctual-local:nodes"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
        }  # fmt: skip
        status, body = self.request(
            "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding
        )
        if status not in (201, 409):
            raise RuntimeError(f"binding system:node to system:nodes: HTTP {status}: {body[:300]}")
        self.start("containerd")
        self.node.wait_runtime()
        self.node.load_base_images(IMAGE_CACHE)
        self.start("kubelet")
        self.start("kube-proxy")

    def down(self) -> None:
        """Stop exactly the processes this cluster started, newest first, then drop its state."""
        self._load_pids()
        operator = self.state_dir / "operator.pid"  # `make demo`'s operator, if any
        if operator.exists():
            self.pids = {"operator": int(operator.read_text().strip()), **self.pids}
            operator.unlink()
            self.stop("operator")
        for name in reversed(realnode.COMPONENTS):
            if name in self.pids:
                if name == "containerd":
                    self.node.stop_containers()
                self.stop(name)
        for name in reversed(COMPONENTS):
            if name in self.pids:
                self.stop(name)
        left = self.node.restore_host()
        mounted = [m for m in hoststate.mounts() if m.startswith(f"{self.state_dir}/")]
        if mounted:  # never delete through a mount
            raise HostNotRestored([*left, *(f"mount {m} is still mounted" for m in mounted)])
        for entry in self.state_dir.iterdir() if self.state_dir.exists() else []:
            if entry.name == "bin":
                continue
            if entry.is_dir() and not entry.is_symlink():
                _rmtree(entry)
            else:
                entry.unlink()
        if left:
            raise HostNotRestored(left)

    def start(self, name: str) -> int:
        """Start one component in its own session so it outlives the caller."""
        log = open(self._path("logs", f"{name}.log"), "ab")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(
            self._argv(name),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.state_dir,
        )
        log.close()
        self.pids[name] = proc.pid
        self._save_pids()
        return proc.pid

    def stop(self, name: str, timeout: float = 15.0, sig: int = signal.SIGTERM) -> None:
        """Stop one component by its recorded pid: `sig` (SIGTERM, or SIGKILL for a crash),
        then SIGKILL after `timeout`."""
        pid = self.pids.pop(name, None)
        self._save_pids()
        if pid is None or not _alive(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        end = time.monotonic() + timeout
        while time.monotonic() < end and _alive(pid):
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)

    def restart(self, name: str) -> None:
        self.stop(name)
        self.start(name)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the API server answers /readyz with ok."""
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            try:
                status, body = self.request("GET", "/readyz")
                if status == 200:
                    return
                last = f"HTTP {status}: {body[:200]!r}"
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            self._check_alive("etcd", "kube-apiserver")
            time.sleep(0.2)
        raise TimeoutError(f"kube-apiserver not ready after {timeout:.0f}s: {last}")

    def wait_serving(self, name: str, timeout: float = 60.0) -> None:
        """Wait until kube-controller-manager or kube-scheduler answers on its secure port
        (any HTTP status will do: it answers once it is up, whoever may ask)."""
        port = {
            "kube-controller-manager": self.ports.controller_manager,
            "kube-scheduler": self.ports.scheduler,
        }[name]
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed at start
        end = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=2
                ):
                    return
            except urllib.error.HTTPError:
                return
            except OSError as exc:
                self._check_alive(name)
                if time.monotonic() > end:
                    raise TimeoutError(f"{name} not serving after {timeout:.0f}s: {exc}") from exc
                time.sleep(0.2)

    def request(self, method: str, path: str, body: object | None = None) -> tuple[int, str]:
        """One authenticated request to the API server (for readiness and set-up)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token()}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        ctx = ssl.create_default_context(cafile=self._path("pki", "ca.crt"))
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    # -- internals ---------------------------------------------------------------------

    @property
    def _pid_file(self) -> Path:
        return self.state_dir / "pids.json"

    def _save_pids(self) -> None:
        self._pid_file.write_text(json.dumps(self.pids))

    def _load_pids(self) -> None:
        if self._pid_file.exists():
            self.pids = {k: int(v) for k, v in json.loads(self._pid_file.read_text()).items()}

    def _token(self) -> str:
        return (self.state_dir / "pki" / "admin.token").read_text().strip()

    def _check_alive(self, *names: str) -> None:
        for name in names:
            pid = self.pids.get(name)
            if pid is not None and not _alive(pid) and not self.revive_kwok():
                tail = _tail(self.state_dir / "logs" / f"{name}.log")
                raise RuntimeError(f"{name} exited during start-up; last lines:\n{tail}")

    def revive_kwok(self) -> bool:
        """Start kwok again if it died of its known race, and say whether it did.

        kwok 0.8 builds each Stage's CEL environment lazily, on the stage's first match,
        and two stages doing so at once can write easycel's type registry together: the
        Go runtime then ends the process ("fatal error: concurrent map writes"). kwok
        keeps no state of its own (nodes and pods live in the API server), so a new one
        carries on where the old one stopped. Any other exit is left for the caller.
        """
        pid = self.pids.get("kwok")
        if pid is None or _alive(pid) or self._kwok_revivals >= 3:
            return False
        log = self.state_dir / "logs" / "kwok.log"
        crashes = log.read_text(errors="replace").count("fatal error: concurrent map writes")
        if crashes <= self._kwok_revivals:  # this exit was something else
            return False
        self._kwok_revivals += 1
        print(
            f"localcluster: kwok hit its registry race; starting it again ({self._kwok_revivals}/3)"
        )
        self.start("kwok")
        return True

    def _argv(self, name: str) -> list[str]:
        p = self.ports

        def pki(f: str) -> str:
            return self._path("pki", f)

        kubeconfig = str(self.kubeconfig)
        if name in realnode.COMPONENTS:
            return self.node.argv(name, self.binary)
        if name == "etcd":
            return [
                self.binary("etcd"),
                "--name=punctual",
                f"--data-dir={self._path('etcd')}",
                f"--listen-client-urls=http://127.0.0.1:{p.etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{p.etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-cluster=punctual=http://127.0.0.1:{p.etcd_peer}",
                "--unsafe-no-fsync",  # a test cluster: processes die, the machine does not
                "--log-level=warn",
            ]
        if name == "kube-apiserver":
            return [
                self.binary("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{p.etcd_client}",
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
                f"--secure-port={p.apiserver}",
                f"--cert-dir={self._path('pki')}",
                f"--tls-cert-file={pki('apiserver.crt')}",
                f"--tls-private-key-file={pki('apiserver.key')}",
                f"--client-ca-file={pki('ca.crt')}",
                f"--token-auth-file={pki('tokens.csv')}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki('sa.pub')}",
                f"--service-account-signing-key-file={pki('sa.key')}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                f"--audit-policy-file={self._path('audit-policy.yaml')}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                # A namespace of 20 000 schedules is emptied in seconds, not a minute
                # of one-by-one deletes that would slow the tests after it.
                "--delete-collection-workers=8",
                f"--kubelet-client-certificate={pki('apiserver-kubelet-client.crt')}",
                f"--kubelet-client-key={pki('apiserver-kubelet-client.key')}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--v=1",
            ]
        if name == "kube-controller-manager":
            return [
                self.binary("kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.controller_manager}",
                "--leader-elect=false",
                f"--service-account-private-key-file={pki('sa.key')}",
                f"--root-ca-file={pki('ca.crt')}",
                "--use-service-account-credentials=false",
                "--controllers=*",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ]
        if name == "kube-scheduler":
            return [
                self.binary("kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.scheduler}",
                "--leader-elect=false",
                "--v=1",
            ]
        if name == "kwok":
            return [
                self.binary("kwok"),
                f"--kubeconfig={kubeconfig}",
                f"--config={self._path('kwok.yaml')}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--server-address=127.0.0.1:{p.kwok}",
                "--node-ip=10.200.0.1",
                "--cidr=10.200.0.0/16",
                "--v=1",
            ]
        raise ValueError(f"unknown component {name!r}; known: {', '.join(ALL_COMPONENTS)}")

    def _write_credentials(self) -> None:
        """A CA, the API server's serving cert, a service-account key pair and an admin token."""
        pki = self.state_dir / "pki"
        if (pki / "admin.token").exists():
            return
        if (pki / "ca.crt").exists():  # made for the real node's certificates
            ca_key, ca_cert = _load_key(pki / "ca.key"), _load_cert(pki / "ca.crt")
        else:
            ca_key, ca_cert = _make_cert("punctual-local-ca", ca=True)
        server_key, server_cert = _make_cert(
            "kube-apiserver",
            signer=(ca_key, ca_cert),
            dns=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ips=["127.0.0.1", "10.96.0.1", realnode.GATEWAY],
        )
        sa_key, _ = _make_cert("service-accounts", ca=True)
        _write_pem(pki / "ca.crt", cert=ca_cert)
        _write_pem(pki / "ca.key", key=ca_key)
        _write_pem(pki / "apiserver.crt", cert=server_cert)
        _write_pem(pki / "apiserver.key", key=server_key)
        _write_pem(pki / "sa.key", key=sa_key)
        _write_pem(pki / "sa.pub", public=sa_key)
        token = secrets.token_hex(24)
        (pki / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        (pki / "admin.token").write_text(token + "\n")
        self._write_client_cert(
            "kube-apiserver-kubelet-client", "system:masters", pki / "apiserver-kubelet-client"
        )

    def _write_client_cert(self, user: str, group: str, stem: Path) -> None:
        """A client certificate for `user` in `group`, signed by the cluster CA (stem.crt/.key)."""
        pki = self.state_dir / "pki"
        if not (pki / "ca.crt").exists():
            ca_key, ca_cert = _make_cert("punctual-local-ca", ca=True)
            _write_pem(pki / "ca.crt", cert=ca_cert)
            _write_pem(pki / "ca.key", key=ca_key)
        signer = (_load_key(pki / "ca.key"), _load_cert(pki / "ca.crt"))
        key, cert = _make_cert(user, organization=group, signer=signer)
        _write_pem(stem.with_suffix(".crt"), cert=cert)
        _write_pem(stem.with_suffix(".key"), key=key)

    def _write_configs(self) -> None:
        (self.state_dir / "audit-policy.yaml").write_text(audit_policy())
        (self.state_dir / "kwok.yaml").write_text(kwok_stages(int(self.pod_run_milliseconds)))
        ca = base64.b64encode((self.state_dir / "pki" / "ca.crt").read_bytes()).decode()
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "punctual-local",
                            "cluster": {"server": self.server, "certificate-authority-data": ca},
                        }
                    ],
                    "users": [{"name": "admin", "user": {"token": self._token()}}],
                    "contexts": [
                        {
                            "name": "punctual-local",
                            "context": {"cluster": "punctual-local", "user": "admin"},
                        }
                    ],
                    "current-context": "punctual-local",
                },
                indent=2,
            )
        )
        self.kubeconfig.chmod(0o600)

    def _create_nodes(self) -> None:
        import yaml  # PyYAML ships with the project's dependencies

        for i in range(self.nodes):
            node = yaml.safe_load(manifest("kwok-node.yaml", name=f"kwok-node-{i}"))
            status, body = self.request("POST", "/api/v1/nodes", node)
            if status not in (201, 409):
                raise RuntimeError(f"creating node kwok-node-{i}: HTTP {status}: {body[:300]}")

    def _wait_node_ready(self, timeout: float) -> None:
        end = time.monotonic() + max(timeout, 1.0)
        wanted = self.nodes + (1 if self.real_node else 0)
        while time.monotonic() < end:
            self._check_alive(*self.components)
            status, body = self.request("GET", "/api/v1/nodes")
            if status == 200:
                ready = [
                    n["metadata"]["name"]
                    for n in json.loads(body)["items"]
                    if any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in n.get("status", {}).get("conditions", [])
                    )
                ]
                if len(ready) >= wanted:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"not every node became Ready ({wanted} wanted)")


class HostNotRestored(RuntimeError):
    """cluster-down stopped everything, but the host still differs from before cluster-up."""

    def __init__(self, differences: list[str]):
        self.differences = differences
        super().__init__("the host is not as cluster-up found it:\n  " + "\n  ".join(differences))


def free_port() -> int:
    """A loopback TCP port nothing listens on now (for an operator's metrics endpoint)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _make_cert(
    common_name: str,
    *,
    organization: str | None = None,
    ca: bool = False,
    signer: tuple[RSAPrivateKey, Certificate] | None = None,
    dns: list[str] | None = None,
    ips: list[str] | None = None,
) -> tuple[RSAPrivateKey, Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    subject = x509.Name(attributes)
    now = dt.datetime.now(dt.UTC)
    sign_key, sign_cert = signer if signer else (key, None)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(sign_cert.subject if sign_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if dns or ips:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns or []]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips or []]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(sign_key, hashes.SHA256())
    return key, cert


def _load_key(path: Path) -> RSAPrivateKey:
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = ser.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def _load_cert(path: Path) -> Certificate:
    from cryptography import x509

    return x509.load_pem_x509_certificate(path.read_bytes())


def _write_pem(
    path: Path,
    *,
    cert: Certificate | None = None,
    key: RSAPrivateKey | None = None,
    public: RSAPrivateKey | None = None,
) -> None:
    from cryptography.hazmat.primitives import serialization as ser

    if cert is not None:
        data = cert.public_bytes(ser.Encoding.PEM)
    elif key is not None:
        data = key.private_bytes(
            ser.Encoding.PEM, ser.PrivateFormat.TraditionalOpenSSL, ser.NoEncryption()
        )
    elif public is not None:
        data = public.public_key().public_bytes(
            ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo
        )
    else:
        raise TypeError("_write_pem needs one of cert, key or public")
    path.write_bytes(data)
    path.chmod(0o600)


def real_node_wanted() -> bool:
    """The default: a real node when the machine can run one, unless PUNCTUAL_REAL_NODE=0."""
    return (
        os.environ.get("PUNCTUAL_REAL_NODE", "1") != "0" and realnode.unavailable_reason() is None
    )


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie child counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["up", "down", "restart"])
    parser.add_argument("component", nargs="?", choices=ALL_COMPONENTS)
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument(
        "--port-base",
        type=int,
        default=int(os.environ.get("PUNCTUAL_PORT_BASE", DEFAULT_PORT_BASE)),
        help="API server port; etcd, controller-manager, scheduler and kwok use the next five",
    )
    parser.add_argument("--nodes", type=int, default=1, help="fake kwok nodes to create")
    parser.add_argument(
        "--real-node",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add a real node (containerd, kubelet, kube-proxy); default: when root on Linux"
        " and PUNCTUAL_REAL_NODE is not 0",
    )
    parser.add_argument(
        "--pod-run-ms",
        type=int,
        default=int(os.environ.get("PUNCTUAL_POD_RUN_MS", DEFAULT_POD_RUN_MILLISECONDS)),
        help="how long a Job's pod runs on a fake node before it succeeds",
    )
    args = parser.parse_args(argv)
    real_node = args.real_node
    if args.action == "up" and real_node is None:
        real_node = real_node_wanted()
    cluster = LocalCluster(
        state_dir=args.state_dir,
        port_base=args.port_base,
        nodes=args.nodes,
        pod_run_milliseconds=args.pod_run_ms,
        real_node=real_node,
    )
    if args.action == "up":
        started = time.monotonic()
        try:
            cluster.up()
        except Exception as exc:
            print(f"cluster-up failed: {exc}", file=sys.stderr)
            cluster.down()
            return 1
        node = f" with real node {realnode.NODE_NAME}" if cluster.real_node else ""
        print(
            f"control plane{node} ready in {time.monotonic() - started:.1f}s at {cluster.server}\n"
            f"  export KUBECONFIG={cluster.kubeconfig}\n"
            f"  {cluster.bin_dir}/kubectl get nodes"
        )
    elif args.action == "down":
        started = time.monotonic()
        try:
            cluster.down()
        except HostNotRestored as exc:
            print(f"cluster-down: {exc}", file=sys.stderr)
            return 1
        if real_node or cluster.real_node:
            print(f"cluster-down: stopped and host restored in {time.monotonic() - started:.1f}s")
    else:
        if not args.component:
            parser.error("restart needs a component")
        cluster._load_pids()
        cluster.restart(args.component)
    return 0


if __name__ == "__main__":
    sys.exit(main())
