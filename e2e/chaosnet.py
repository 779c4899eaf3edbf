"""The network the fault campaign (tests/e2e/test_chaos.py) puts its operators behind.

Two faults of the campaign are about the path between an operator and the API server,
so the campaign owns that path:

- DelayProxy: a TCP proxy in front of kube-apiserver. The operators connect through it
  for the whole campaign; while `slow` is set, every chunk the API server sends back is
  held 1-3 s before it is passed on ("the API server slowed"). TLS passes through
  untouched (bytes are relayed, not parsed), so the operators' kubeconfig names the
  proxy's address and `tls-server-name: localhost`, a name the serving certificate holds.
- Namespaces: each operator replica runs in a network namespace of its own (`ip netns
  exec` before the interpreter), joined by a veth pair to a bridge on this host whose
  address is the proxy's. "The leader's network dropped" is an nftables table inside the
  leader's namespace that drops everything but loopback; deleting the table restores it.
  Every replica has a namespace (not only the one that will be cut off) because any
  replica can be the leader when the fault comes.

Everything made here is named after the cluster's port base (`pc<base>-<i>` namespaces,
the `pc<base>br` bridge), so two campaigns on one machine do not meet, and clean() removes
whatever an interrupted run left. It needs root, `ip` and `nft`.

    python e2e/chaosnet.py clean --port-base 22443
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

DELAY = (1.0, 3.0)  # seconds a response chunk is held while the proxy is slow
NFT_TABLE = "punctual_chaos"
_DROP_ALL_BUT_LOOPBACK = f"""
table inet {NFT_TABLE} {{
    chain input {{ type filter hook input priority 0; policy accept; iifname != "lo" drop; }}
    chain output {{ type filter hook output priority 0; policy accept; oifname != "lo" drop; }}
}}
"""


class DelayProxy:
    """A TCP relay from `listen` (host, port 0 for any) to `upstream`, in a thread of its own.

    Client-to-server bytes go straight through. Server-to-client bytes are relayed in order,
    each chunk no sooner than it arrived plus, while `slow` is true, a delay drawn from
    `delay`: latency is added, not a throughput limit, so a watch stream is late by seconds
    but never falls further behind.
    """

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: tuple[str, int],
        delay: tuple[float, float] = DELAY,
        seed: int = 0,
    ):
        self.listen = listen
        self.upstream = upstream
        self.delay = delay
        self.slow = False
        self.port = 0
        self.connections = 0  # accepted so far
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="delay-proxy", daemon=True)
        self._ready = threading.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._error: BaseException | None = None

    def start(self) -> DelayProxy:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(
                f"the delay proxy could not listen on {self.listen}"
            ) from self._error
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- in the proxy's thread ---------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, *self.listen)
            )
            self.port = int(self._server.sockets[0].getsockname()[1])
        except OSError as error:
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
            self._loop.close()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        server_w: asyncio.StreamWriter | None = None
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
            up = asyncio.ensure_future(self._pump(client_r, server_w))
            down = asyncio.ensure_future(self._delayed_pump(server_r, client_w))
            try:
                await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                up.cancel()
                down.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
        except OSError:
            pass  # the API server is down (a restart fault): the client sees the close
        finally:
            for writer in (client_w, server_w):
                if writer is not None:
                    writer.close()
            self._tasks.discard(task)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    async def _delayed_pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        due = 0.0
        try:
            with contextlib.suppress(OSError):
                while data := await reader.read(65536):
                    held = self._rng.uniform(*self.delay) if self.slow else 0.0
                    due = max(due, loop.time() + held)  # in order, never before an earlier chunk
                    queue.put_nowait((due, data))
            queue.put_nowait((due, b""))
            with contextlib.suppress(OSError):
                await sender
        finally:
            sender.cancel()


@dataclass
class Namespaces:
    """Network namespaces, one per operator replica, on a bridge whose address is `gateway`."""

    port_base: int
    made: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"pc{self.port_base}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def subnet(self) -> str:
        """A /24 of 10.202/16 picked by the port base (the real node uses 10.201)."""
        return f"10.202.{(self.port_base // 10) % 250}"

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    def up(self) -> Namespaces:
        ensure_tools()
        self.clean()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def add(self, index: int) -> str:
        """Make namespace number `index` (0-239) joined to the bridge; its name."""
        name = f"{self.prefix}-{index}"
        host_end = f"{self.prefix}h{index}"
        _ip("netns", "add", name)
        self.made.append(name)
        _ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("link", "set", host_end, "master", self.bridge, "up")
        _ip("-n", name, "addr", "add", f"{self.subnet}.{10 + index}/24", "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")
        _ip("-n", name, "link", "set", "lo", "up")
        return name

    def wrapper(self, name: str) -> list[str]:
        """The command prefix that runs a process in namespace `name`."""
        return ["ip", "netns", "exec", name]

    def drop(self, name: str) -> None:
        """Cut namespace `name` off: everything but loopback is dropped, both ways."""
        _run(["ip", "netns", "exec", name, "nft", "-f", "-"], input=_DROP_ALL_BUT_LOOPBACK)

    def restore(self, name: str) -> None:
        _run(["ip", "netns", "exec", name, "nft", "delete", "table", "inet", NFT_TABLE])

    def clean(self) -> list[str]:
        """Delete every namespace and the bridge of this port base (the veth pairs and nft
        tables go with their namespace); what was removed."""
        removed = []
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        for line in listed.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(f"{self.prefix}-"):
                _ip("netns", "del", name, check=False)
                removed.append(name)
        if os.path.exists(f"/sys/class/net/{self.bridge}"):
            _ip("link", "del", self.bridge, check=False)
            removed.append(self.bridge)
        for left in _host_ends(self.prefix):  # a veth whose namespace is held by a process
            _ip("link", "del", left, check=False)
            removed.append(left)
        self.made.clear()
        return removed

    def __enter__(self) -> Namespaces:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.clean()


def ensure_tools() -> None:
    """Install Debian's iproute2 and nftables when `ip` or `nft` is missing (as root)."""
    missing = [pkg for tool, pkg in (("ip", "iproute2"), ("nft", "nftables")) if not _which(tool)]
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        argv = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
        result = subprocess.run(argv, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{result.stderr[-2000:]}")


def _which(tool: str) -> bool:
    import shutil

    return shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is not None


def _host_ends(prefix: str) -> list[str]:
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return []
    return [n for n in names if n.startswith(f"{prefix}h")]


def _ip(*args: str, check: bool = True) -> None:
    _run(["ip", *args], check=check)


def _run(argv: list[str], input: str | None = None, check: bool = True) -> None:
    result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")


def wait_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Wait until something accepts TCP connections on host:port."""
    import socket

    end = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["clean"])
    parser.add_argument(
        "--port-base",
        type=int,
        default=int(os.environ.get("PUNCTUAL_TEST_PORT_BASE", "17443")),
        help="the port base of the cluster the campaign ran against",
    )
    args = parser.parse_args(argv)
    removed = Namespaces(args.port_base).clean()
    print("removed: " + (", ".join(removed) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
