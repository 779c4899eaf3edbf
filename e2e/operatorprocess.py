"""One `punctual run` process, started and watched from outside, for the e2e tests and the bench.

Why it exists: the e2e tests (tests/e2e/operators.py) and the benchmark (bench/replicas.py)
both run the real operator as a separate OS process, so that they can SIGKILL, SIGSTOP or
SIGTERM it as Kubernetes would and read its /metrics endpoint. Both start it, signal it,
scrape it and stop it the same way; this is that one way.

What it must never do: decide the operator's flags or environment (the caller does: the
tests add a short Lease and a KUBECONFIG, the bench its client limits and the commit it
benchmarks), signal any process it did not start, or do anything at import time. It
imports only the standard library and localcluster.free_port, so it needs e2e/ on
sys.path, as tests/e2e/conftest.py and bench/run.py arrange.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from localcluster import free_port

_API_REQUESTS = re.compile(r'punctual_api_requests_total\{code="(\d+)",verb="(\w+)"\} (\S+)')


@dataclass
class OperatorProcess:
    """A started `punctual run` (`python -m punctual.cli run`) and where its output goes."""

    identity: str
    namespace: str
    log: Path  # stdout and stderr, appended
    proc: subprocess.Popen[bytes]
    metrics_port: int
    profile_path: Path | None = None  # the cProfile output, when started under cProfile

    @classmethod
    def start(
        cls,
        identity: str,
        namespace: str,
        *args: str,
        log: Path,
        env: Mapping[str, str],
        cwd: Path,
        kubeconfig: Path | None = None,
        wrapper: Sequence[str] = (),
        python: Sequence[str] = (sys.executable,),
        profile_path: Path | None = None,
    ) -> OperatorProcess:
        """Start `punctual run` watching `namespace`, with its Lease there too.

        `args` come after the flags set here (identity, namespace, metrics port). `env` is
        the whole environment of the process. `wrapper` runs before the interpreter (for
        example `setpriv ...`); `python` is the interpreter's command line (for example
        `python -m cProfile -o <profile_path>`). `kubeconfig`, if given, is passed as
        --kubeconfig; otherwise the operator finds its cluster from `env`.
        """
        port = free_port()
        argv = [*wrapper, *python, "-m", "punctual.cli", "run"]
        if kubeconfig is not None:
            argv += ["--kubeconfig", str(kubeconfig)]
        argv += [
            *("--namespace", namespace, "--lease-namespace", namespace),
            *("--identity", identity, "--metrics-port", str(port)),
            *args,
        ]
        with log.open("ab") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                cwd=cwd,
            )
        return cls(identity, namespace, log, proc, port, profile_path)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def user_agent(self) -> str:
        """The User-Agent of its requests, as the API server's audit log records it."""
        return f"punctual/{self.identity}"

    # -- its HTTP endpoint -------------------------------------------------------------

    def scrape(self) -> str:
        """The operator's /metrics text (raises OSError if it does not answer)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def get(self, path: str) -> tuple[int, str]:
        """(HTTP status, body) of a GET on its metrics port, an error status included (a
        503 from /readyz says what it waits for); (0, the error) if nothing answers."""
        try:
            url = f"http://127.0.0.1:{self.metrics_port}{path}"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode(errors="replace")
        except OSError as error:
            return 0, str(error)

    def metric(self, name: str) -> float | None:
        """The value of an unlabelled metric, or None if absent or not scraped."""
        status, text = self.get("/metrics")
        if status != 200:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{}"):
                return float(line.split()[-1])
        return None

    def api_requests(self) -> dict[str, float]:
        """The operator's own count of its API requests, as {"<verb> <code>": count}."""
        status, text = self.get("/metrics")
        out: dict[str, float] = {}
        if status != 200:
            return out
        for line in text.splitlines():
            match = _API_REQUESTS.match(line)
            if match:
                out[f"{match.group(2)} {match.group(1)}"] = float(match.group(3))
        return out

    # -- its life ----------------------------------------------------------------------

    def signal(self, sig: int) -> None:
        """Send `sig`, unless the process has exited (never to a pid reused since)."""
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM and wait: the operator releases its Lease and exits. Its exit code.

        A stopped (SIGSTOP) process is continued first so that it can handle SIGTERM; one
        that does not exit within `timeout` seconds is killed.
        """
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL (which ends a stopped process too) and wait for it."""
        self.signal(signal.SIGKILL)
        self.proc.wait(10)

    def output(self) -> str:
        """Everything it has written so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""
