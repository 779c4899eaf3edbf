"""The operator process as Kubernetes runs it: an arbitrary numeric user, fatal errors
that must show as a failed container, and SIGTERM at pod deletion.

A container runtime starts the image's numeric user with no passwd entry and none of
the USER/LOGNAME variables a login shell sets (OpenShift picks an arbitrary uid too).
A process that exits 0 after a fatal error looks Completed to the kubelet: the pod
restarts with no error anywhere. And a pod deletion is a SIGTERM: the standby may only
take over once the Lease is released, so that release must come at once.
"""

from __future__ import annotations

import os
import re
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from .conftest import Cluster
from .operators import operators, wait_until
from .test_operator import apply, leader_of, schedule

pytestmark = pytest.mark.e2e

NO_LOGIN = {"USER": "", "LOGNAME": "", "LNAME": "", "USERNAME": "", "HOME": "/nonexistent"}
UNKNOWN_UID = 4242  # no passwd entry on the test host, as in a container


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def test_a_numeric_user_without_a_passwd_entry_watches_and_leads(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("starting a process as another user needs root")
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwuid(UNKNOWN_UID)
    with operators(crd, namespace, workdir) as ops:
        op = ops.start("nameless", env=NO_LOGIN, uid=UNKNOWN_UID)
        wait_until(
            lambda: leader_of(crd, namespace) == "nameless" or op.proc.poll() is not None,
            30,
            what="the nameless operator leads (or exits)",
        )
        assert op.proc.poll() is None, f"exited with {op.proc.returncode}:\n{op.output()}"
        assert leader_of(crd, namespace) == "nameless"
        ready = wait_until(lambda: _ready(op.metrics_port), 20, what="/readyz")
        assert ready
        assert op.stop() == 0
    assert "Traceback" not in op.output()


def test_a_fatal_error_is_logged_with_its_cause_and_exits_non_zero(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    # Fault injection: kopf's operator fails a second after it starts, as it did when it
    # could not name the user. The Lease loop is already running by then.
    inject = workdir / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(
        "import asyncio, kopf\n"
        "async def operator(**_):\n"
        "    await asyncio.sleep(1)\n"
        "    raise RuntimeError('injected: the watches cannot start')\n"
        "kopf.operator = operator\n"
    )
    with operators(crd, namespace, workdir) as ops:
        op = ops.start("doomed", env={"PYTHONPATH": str(inject)})
        code = op.proc.wait(30)
        output = op.output()
    assert code == 1, output
    assert "watching failed: RuntimeError: injected: the watches cannot start" in output
    assert "Traceback" in output  # the cause, logged once with its stack
    assert output.rstrip().splitlines()[-1] == (
        "punctual: watching failed: RuntimeError: injected: the watches cannot start"
    )
    assert leader_of(crd, namespace) in ("", "doomed")  # never a third party


def test_sigterm_releases_the_lease_within_a_second(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    default_lease = ("--lease-duration", "15", "--renew-deadline", "10", "--retry-period", "2")
    with operators(crd, namespace, workdir) as ops:
        op = ops.start("leaving", lease=default_lease)
        wait_until(lambda: leader_of(crd, namespace) == "leaving", 30, what="it leads")
        apply(crd, namespace, schedule("busy", "* * * * * *"))  # firing while it stops
        wait_until(lambda: _ready(op.metrics_port), 20, what="/readyz")
        time.sleep(3)  # as a pod would be: running (and firing) a while before its deletion
        sent = datetime.now(UTC)
        op.signal(signal.SIGTERM)
        wait_until(lambda: leader_of(crd, namespace) == "", 10, interval=0.05, what="release")
        observed = (datetime.now(UTC) - sent).total_seconds()
        assert op.proc.wait(20) == 0
        output = op.output()
    released = _logged_at(output, "released Lease punctual-leader")
    handover = (released - sent).total_seconds()
    print(f"\nhand-over: Lease released {handover:.3f} s after SIGTERM (seen {observed:.3f} s)")
    assert output.count("released Lease") == 1
    assert handover <= 1.0
    # Shutdown is quiet: no traceback, no "Task exception was never retrieved", no error.
    for noise in ("Traceback", "never retrieved", "Session is closed", " ERROR "):
        assert noise not in output, output


def _ready(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _logged_at(output: str, message: str) -> datetime:
    """The local time of the first log line with `message` (text format: asctime)."""
    for line in output.splitlines():
        if message in line:
            stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})", line)
            assert stamp, line
            # logging writes naive local time; astimezone() reads it as such
            at = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S")  # noqa: DTZ007
            return at.replace(microsecond=int(stamp[2]) * 1000).astimezone(UTC)
    raise AssertionError(f"{message!r} not in the log")


def test_a_taken_metrics_port_is_one_line_and_exit_1(
    crd: Cluster, namespace: str, workdir: Path
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with operators(crd, namespace, workdir) as ops:
            op = ops.start("second", "--metrics-port", str(port))  # the last flag wins
            code = op.proc.wait(30)
            output = op.output()
    assert code == 1, output
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"punctual: cannot serve metrics on port {port}: "), last
    assert "already in use" in last.lower(), last
    assert "Traceback" not in output and "never retrieved" not in output
    assert leader_of(crd, namespace) == ""  # it never took the Lease
