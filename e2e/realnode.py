"""A real node beside the kwok ones: containerd, runc, CNI, kubelet and kube-proxy.

kwok's nodes "run" pods without a container runtime, which is right for most tests and
useless for the one question a platform team asks first: does the image come up, as pods,
through its real probes, on a real node? This module gives the local cluster one node that
runs containers, so the chart is tested the way users run it.

Everything it runs is started and stopped by pid by LocalCluster; everything it changes
on the host is recorded first (hoststate) and undone when it stops. It never touches the
machine's own interfaces: the node's address is the gateway of a bridge it creates, and
the API server listens there (and on nothing else) while the node exists. Only one real
node can run per host (kube-proxy's netfilter table has a fixed name); a second is refused.

The node is tainted and labelled, so only pods meant for it (selecting NODE_LABEL and
tolerating NODE_TAINT) land on it; the images it runs are made here (busybox-static from
Debian, and a pause image from the same binary) because nothing can be pulled.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import hoststate

NODE_NAME = "punctual-node"
BRIDGE = "punctual0"
SUBNET = "10.201.0.0/24"
GATEWAY = "10.201.0.1"  # the node's address, and the API server's while the node exists
CGROUP_PARENT = "punctual"  # the kubelet's cgroupRoot, in every hierarchy
NODE_LABEL = ("punctual.dev/node", "real")
NODE_TAINT = {"key": "punctual.dev/node", "value": "real", "effect": "NoSchedule"}
COMPONENTS = ("containerd", "kubelet", "kube-proxy")
PAUSE_IMAGE = "localhost/punctual-pause:1"
BUSYBOX_IMAGE = "localhost/punctual-busybox:1"
# Debian packages the node needs, by a file each one installs.
PACKAGES = {
    "/usr/bin/containerd": "containerd",
    "/usr/sbin/runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/bin/busybox": "busybox-static",
    "/usr/sbin/nft": "nftables",
    "/usr/sbin/ip": "iproute2",
}
CNI_BIN = "/usr/lib/cni"
# Which state directory's node made the bridge, and the host as it found it: a node whose
# cluster was killed without `make cluster-down` (a CI job cut short, a session ended) is
# found by the next clone through this, and undone (LocalCluster reclaims it).
OWNER = Path("/run/punctual-node.json")
_PAUSE_COMMAND = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]


def unavailable_reason() -> str | None:
    """Why this machine cannot run a real node, or None when it can."""
    if os.uname().sysname != "Linux":
        return "a real node needs Linux"
    if os.geteuid() != 0:
        return "a real node needs root (containerd, kubelet and kube-proxy change the host)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "a real node needs /sys/fs/cgroup"
    return None


def another_node_runs() -> bool:
    return Path(f"/sys/class/net/{BRIDGE}").exists()


def recorded_owner() -> tuple[Path, hoststate.Snapshot] | None:
    """The state directory of the node that made the bridge, and its ledger, if recorded."""
    try:
        owner = json.loads(OWNER.read_text())
        return Path(owner["state_dir"]), owner["before"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


class RealNode:
    """The files, arguments, set-up and tear-down of the one real node."""

    def __init__(self, node_dir: Path, *, api_port: int, ports: tuple[int, int, int, int]):
        self.dir = node_dir
        self.api_port = api_port
        self.kubelet_port, self.kubelet_healthz, self.proxy_healthz, self.proxy_metrics = ports

    # -- paths ---------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    @property
    def ledger(self) -> Path:
        return self.dir / "host-before.json"

    def _p(self, *parts: str) -> str:
        return str(self.dir.joinpath(*parts))

    # -- set-up --------------------------------------------------------------------------

    def prepare(self, pki: Path, make_client_cert: Callable[[str, str, Path], None]) -> None:
        """Record the host, then create the bridge, cgroups, configs and credentials."""
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        if another_node_runs():
            raise RuntimeError(
                f"another real node runs on this host (link {BRIDGE} exists); "
                "run `make cluster-down` in its clone first"
            )
        _install_missing_packages()
        self.dir.mkdir(parents=True, exist_ok=True)
        before = hoststate.take(self.dir)
        hoststate.save(before, self.ledger)
        OWNER.write_text(json.dumps({"state_dir": str(self.dir.parent), "before": before}))
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for hierarchy in hoststate.cgroup_hierarchies():
            with contextlib.suppress(OSError):
                (hierarchy / CGROUP_PARENT).mkdir(exist_ok=True)
        for sub in ("cni", "cni-ipam", "kubelet", "pod-logs", "containerd"):
            (self.dir / sub).mkdir(exist_ok=True)
        make_client_cert(f"system:node:{NODE_NAME}", "system:nodes", self.dir / "kubelet-client")
        make_client_cert("system:kube-proxy", "system:node-proxier", self.dir / "proxy-client")
        self._write_configs(pki)

    def _write_configs(self, pki: Path) -> None:
        (self.dir / "containerd.toml").write_text(_CONTAINERD.format(node=self.dir, cni_bin=CNI_BIN, sock=self.socket, pause=PAUSE_IMAGE))  # fmt: skip
        (self.dir / "cni" / "10-punctual.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": "punctual",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": False,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": SUBNET, "gateway": GATEWAY}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": self._p("cni-ipam"),
                            },
                        }
                    ],
                }
            )
        )
        for who in ("kubelet", "proxy"):
            (self.dir / f"{who}.kubeconfig").write_text(
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [
                            {
                                "name": "local",
                                "cluster": {
                                    "server": f"https://{GATEWAY}:{self.api_port}",
                                    "certificate-authority": str(pki / "ca.crt"),
                                },
                            }
                        ],
                        "users": [
                            {
                                "name": who,
                                "user": {
                                    "client-certificate": self._p(f"{who}-client.crt"),
                                    "client-key": self._p(f"{who}-client.key"),
                                },
                            }
                        ],
                        "contexts": [
                            {"name": "local", "context": {"cluster": "local", "user": who}}
                        ],
                        "current-context": "local",
                    }
                )
            )
        (self.dir / "kubelet.yaml").write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "address": GATEWAY,
                    "port": self.kubelet_port,
                    "readOnlyPort": 0,
                    "healthzBindAddress": "127.0.0.1",
                    "healthzPort": self.kubelet_healthz,
                    "authentication": {
                        "anonymous": {"enabled": False},
                        "webhook": {"enabled": False},
                        "x509": {"clientCAFile": str(pki / "ca.crt")},
                    },
                    "authorization": {"mode": "AlwaysAllow"},
                    "containerRuntimeEndpoint": f"unix://{self.socket}",
                    "cgroupDriver": "cgroupfs",
                    "cgroupRoot": f"/{CGROUP_PARENT}",
                    "failCgroupV1": False,
                    "failSwapOn": False,
                    "podLogsDir": self._p("pod-logs"),
                    "registerWithTaints": [NODE_TAINT],
                    "maxPods": 30,
                    "serializeImagePulls": False,
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "evictionHard": {
                        "memory.available": "50Mi",
                        "nodefs.available": "1%",
                        "imagefs.available": "1%",
                    },
                    "nodeStatusUpdateFrequency": "4s",
                    "syncFrequency": "10s",
                    "fileCheckFrequency": "10s",
                    "resolvConf": "/etc/resolv.conf",
                    "shutdownGracePeriod": "0s",
                    "oomScoreAdj": 0,  # see restrict_oom_score_adj in _CONTAINERD
                }
            )
        )
        (self.dir / "kube-proxy.yaml").write_text(
            json.dumps(
                {
                    "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                    "kind": "KubeProxyConfiguration",
                    "mode": "nftables",
                    "oomScoreAdj": 0,
                    "clientConnection": {"kubeconfig": self._p("proxy.kubeconfig")},
                    "hostnameOverride": NODE_NAME,
                    "bindAddress": GATEWAY,
                    "healthzBindAddress": f"127.0.0.1:{self.proxy_healthz}",
                    "metricsBindAddress": f"127.0.0.1:{self.proxy_metrics}",
                    "clusterCIDR": SUBNET,
                    "nodePortAddresses": [f"{GATEWAY}/32"],
                    # Zero means "leave the kernel's value alone" for each of these.
                    "conntrack": {
                        "maxPerCore": 0,
                        "min": 0,
                        "tcpEstablishedTimeout": "0s",
                        "tcpCloseWaitTimeout": "0s",
                        "udpTimeout": "0s",
                        "udpStreamTimeout": "0s",
                    },
                }
            )
        )

    def argv(self, name: str, binary: Callable[[str], str]) -> list[str]:
        if name == "containerd":
            return ["containerd", f"--config={self._p('containerd.toml')}", "--log-level=warn"]
        if name == "kubelet":
            return [
                binary("kubelet"),
                f"--config={self._p('kubelet.yaml')}",
                f"--kubeconfig={self._p('kubelet.kubeconfig')}",
                f"--root-dir={self._p('kubelet')}",
                f"--cert-dir={self._p('kubelet', 'pki')}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={GATEWAY}",
                f"--node-labels={'='.join(NODE_LABEL)}",
                "--v=1",
            ]
        if name == "kube-proxy":
            return [binary("kube-proxy"), f"--config={self._p('kube-proxy.yaml')}", "--v=1"]
        raise ValueError(f"unknown node component {name!r}")

    def wait_runtime(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.socket.exists() and self.ctr("version", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"containerd did not answer on {self.socket} in {timeout:.0f}s")

    # -- images --------------------------------------------------------------------------

    def load_base_images(self, cache: Path) -> None:
        """Import the pause and busybox images, made once from Debian's busybox-static."""
        cache.mkdir(parents=True, exist_ok=True)
        busybox = Path("/bin/busybox").read_bytes()
        version = hashlib.sha256(busybox).hexdigest()[:12]
        for ref, command in ((PAUSE_IMAGE, _PAUSE_COMMAND), (BUSYBOX_IMAGE, ["sh"])):
            archive = cache / f"{ref.split('/')[-1].replace(':', '-')}-{version}.tar"
            if not archive.exists():
                tmp = archive.with_suffix(".tmp")
                tmp.write_bytes(_oci_archive(ref, busybox, command))
                tmp.rename(archive)
            self.ctr("images", "import", str(archive))

    def import_image(self, ref: str) -> None:
        """Copy an image from the local podman/buildah store into the node's containerd."""
        tool = shutil.which("podman") or shutil.which("buildah")
        if tool is None:
            raise RuntimeError(f"neither podman nor buildah is installed to export {ref}")
        with tempfile.TemporaryDirectory(dir=self.dir) as tmp:
            archive = Path(tmp) / "image.tar"
            if tool.endswith("podman"):
                _run(tool, "save", "--quiet", "--format", "docker-archive", "-o", str(archive), ref)
            else:
                _run(tool, "push", "--quiet", ref, f"docker-archive:{archive}:{ref}")
            self.ctr("images", "import", str(archive))

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", f"--address={self.socket}", "--namespace=k8s.io", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    # -- tear-down -----------------------------------------------------------------------

    def stop_containers(self) -> None:
        """Kill every container while containerd still runs, so that its shims exit."""
        if not self.socket.exists():
            return
        listed = self.ctr("tasks", "ls", "-q", check=False)
        tasks = listed.stdout.split() if listed.returncode == 0 else []
        for task in tasks:
            self.ctr("tasks", "kill", "--all", "--signal=SIGKILL", task, check=False)
        for task in tasks:
            self.ctr("tasks", "delete", "--force", task, check=False)
        listed = self.ctr("containers", "ls", "-q", check=False)
        if listed.returncode == 0 and listed.stdout.split():
            self.ctr("containers", "delete", *listed.stdout.split(), check=False)

    def restore_host(self, before: hoststate.Snapshot | None = None) -> list[str]:
        """Undo what the node changed against the ledger (its own, or `before`, the one
        OWNER kept); returns what still differs."""
        if before is None:
            if not self.ledger.exists():
                return []
            before = hoststate.load(self.ledger)
        now = hoststate.take(self.dir)
        self._kill_leftovers(before, now)
        self._unmount(before)
        _run("ip", "link", "delete", BRIDGE, check=False)
        now = hoststate.take(self.dir)
        self._remove_netfilter(before, now)
        self._remove_links(before)
        self._remove_cgroups(before, now)
        self._remove_directories(before, now)
        refused = hoststate.restore_sysctls(hoststate.changed_sysctls(before, now))
        owner = recorded_owner()
        if owner is None or owner[0] == self.dir.parent:
            OWNER.unlink(missing_ok=True)
        return refused + hoststate.differences(before, hoststate.take(self.dir))

    def _kill_leftovers(self, before: hoststate.Snapshot, now: hoststate.Snapshot) -> None:
        for entry in set(now["processes"]) - set(before["processes"]):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(entry.split()[0]), signal.SIGKILL)
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if not set(hoststate.take(self.dir)["processes"]) - set(before["processes"]):
                break
            time.sleep(0.1)

    def _unmount(self, before: hoststate.Snapshot) -> None:
        old = set(before["mounts"])
        for _ in range(3):
            new = [m for m in hoststate.mounts() if m not in old]
            if not new:
                return
            for mount in sorted(new, key=len, reverse=True):
                if subprocess.run(["umount", mount], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "-l", mount], capture_output=True)

    def _remove_netfilter(self, before: hoststate.Snapshot, now: hoststate.Snapshot) -> None:
        old = set(before["netfilter"])
        added = [item.split() for item in now["netfilter"] if item not in old]
        chains = [a for a in added if len(a) == 3 and f"{a[0]} {a[1]}" in old]
        for family, table, chain, handle in _jumps_into({(c[0], c[1], c[2]) for c in chains}):
            if f"{family} {table} {chain}" in old:  # a rule of ours in a chain we found
                _run("nft", "delete", "rule", family, table, chain, "handle", handle, check=False)
        for family, table, chain in chains:  # first every rule, so no jump is left between them
            _run("nft", "flush", "chain", family, table, chain, check=False)
        for family, table, chain in chains:
            _run("nft", "delete", "chain", family, table, chain, check=False)
        for family, table in (a for a in added if len(a) == 2):
            _run("nft", "delete", "table", family, table, check=False)

    def _remove_links(self, before: hoststate.Snapshot) -> None:
        end = time.monotonic() + 5  # veths vanish with their network namespace, shortly
        while time.monotonic() < end:
            new = [link for link in hoststate.links() if link not in before["links"]]
            if not new:
                return
            time.sleep(0.1)
        for link in new:
            if link.startswith("veth"):
                _run("ip", "link", "delete", link, check=False)

    def _remove_cgroups(self, before: hoststate.Snapshot, now: hoststate.Snapshot) -> None:
        for hierarchy, entries in now["cgroups"].items():
            old = set(before["cgroups"].get(hierarchy, []))
            for entry in entries:
                path = hoststate.CGROUP_ROOT / hierarchy / entry
                if entry not in old and path.is_dir():
                    for dirpath, _dirs, _files in sorted(os.walk(path), key=lambda w: -len(w[0])):
                        with contextlib.suppress(OSError):
                            os.rmdir(dirpath)

    def _remove_directories(self, before: hoststate.Snapshot, now: hoststate.Snapshot) -> None:
        # Deepest first, and only what did not exist before: never a directory we found.
        for directory in sorted(now["directories"], key=len, reverse=True):
            if before["directories"].get(directory) is None and Path(directory).exists():
                shutil.rmtree(directory, ignore_errors=True)


def _install_missing_packages() -> None:
    missing = sorted({pkg for path, pkg in PACKAGES.items() if not Path(path).exists()})
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", *missing],
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(f"apt-get install {' '.join(missing)} failed:\n{result.stderr[-2000:]}")
    # Debian starts containerd as a service when it installs it; the node runs its own.
    subprocess.run(["systemctl", "disable", "--now", "containerd"], capture_output=True)


def _jumps_into(chains: set[tuple[str, str, str]]) -> list[tuple[str, str, str, str]]:
    """(family, table, chain, handle) of every rule that jumps or goes to one of `chains`."""
    listed = _run("nft", "-j", "list", "ruleset", check=False)
    if listed.returncode != 0:
        return []
    found = []
    for item in json.loads(listed.stdout).get("nftables", []):
        rule = item.get("rule")
        if not rule:
            continue
        for expr in rule.get("expr", []):
            verdict = expr.get("jump") or expr.get("goto")
            if verdict and (rule["family"], rule["table"], verdict["target"]) in chains:
                found.append((rule["family"], rule["table"], rule["chain"], str(rule["handle"])))
    return found


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result


def _oci_archive(ref: str, busybox: bytes, command: list[str]) -> bytes:
    """An OCI image archive of one layer: busybox and a link per applet, running `command`."""
    applets = subprocess.run(
        ["/bin/busybox", "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    layer_buffer = io.BytesIO()
    with tarfile.open(fileobj=layer_buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for directory, mode in (("bin", 0o755), ("tmp", 0o1777), ("etc", 0o755)):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, mode
            layer.addfile(info)
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(busybox), 0o755
        layer.addfile(info, io.BytesIO(busybox))
        for applet in applets:
            if applet != "busybox":
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                layer.addfile(link)
        passwd = b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode = len(passwd), 0o644
        layer.addfile(info, io.BytesIO(passwd))
    layer_bytes = layer_buffer.getvalue()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Cmd": command},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer_bytes)]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": _digest(layer_bytes),
                    "size": len(layer_bytes),
                }
            ],
        }
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": ref,
                        "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1],
                    },
                }
            ],
        }
    ).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        files = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": index}
        for blob in (layer_bytes, config, manifest):
            files[f"blobs/sha256/{_digest(blob).split(':')[1]}"] = blob
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


_CONTAINERD = """\
version = 2
root = "{node}/containerd/root"
state = "{node}/containerd/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "{sock}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{node}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  netns_mounts_under_state_dir = true
  # Never below containerd's own: lowering it needs CAP_SYS_RESOURCE, which some hosts
  # (this CI machine among them) do not grant even to root.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{node}/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{node}/containerd/runc"
        SystemdCgroup = false
"""
