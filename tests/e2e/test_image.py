"""The operator image, run as a container runtime runs it.

`make test` builds the image (`make image`) and these tests run it with podman on the
host network against the test's API server: an arbitrary numeric user with no passwd
entry and no USER/LOGNAME (podman would otherwise add an entry and hide the failure),
a read-only root filesystem and every capability dropped, as the Helm chart asks.
The image must watch, lead, fire, and on SIGTERM release its Lease and exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from localcluster import free_port

from .conftest import Cluster
from .operators import job_creates, wait_until
from .test_operator import apply, leader_of, schedule

pytestmark = pytest.mark.e2e

ARBITRARY_UID = 4242  # neither root nor the image's own 65532: no passwd entry
# As a container runtime starts it: that user with no passwd entry (podman would add
# one) and no login variables; limits within the host's hard limits (runc cannot
# raise them for a non-root user).
AS_ARBITRARY_USER = (
    "--passwd=false", "--user", f"{ARBITRARY_UID}:{ARBITRARY_UID}",
    "--unsetenv", "USER", "--unsetenv", "LOGNAME",
    "--ulimit", "nofile=10000:20000", "--ulimit", "nproc=4096:4096",
)  # fmt: skip


@pytest.fixture(scope="module")
def image() -> str:
    """The image `make image` built; required when PUNCTUAL_IMAGE names it (make test)."""
    name = os.environ.get("PUNCTUAL_IMAGE")
    if shutil.which("podman") is None:
        if name:
            pytest.fail(f"PUNCTUAL_IMAGE={name} but podman is not installed")
        pytest.skip("needs podman and an image from `make image`")
    wanted = name or "localhost/punctual:dev"
    if subprocess.run(["podman", "image", "exists", wanted], check=False).returncode != 0:
        if name:
            pytest.fail(f"image {name} not found: run `make image IMAGE={name}`")
        pytest.skip("no image: run `make image`")
    return wanted


def podman(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """podman, with runc where it is installed (the real node installs it, after these
    modules are imported): Debian's crun, podman's default, refuses a host whose cgroups
    are mixed v1 and v2 ("cgroups in hybrid mode not supported"), as this project's
    machines are; runc is what the real node's containerd runs the image with too."""
    runtime = ["--runtime", "runc"] if shutil.which("runc") else []
    return subprocess.run(
        ["podman", *runtime, *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.fixture
def readable_kubeconfig(crd: Cluster) -> Iterator[Path]:
    """The test cluster's kubeconfig, readable by the container's arbitrary user."""
    path = Path(f"/tmp/punctual-image-{uuid.uuid4().hex[:8]}.kubeconfig")
    shutil.copyfile(crd.kubeconfig, path)
    path.chmod(0o644)
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def container_name() -> Iterator[str]:
    name = f"punctual-e2e-{uuid.uuid4().hex[:8]}"
    yield name
    podman("rm", "--force", "--time", "0", name, check=False)


def test_the_image_has_no_entry_for_an_arbitrary_user(image: str) -> None:
    """The premise of the next test: the name lookup that used to kill kopf fails here."""
    out = podman(
        "run", "--rm", *AS_ARBITRARY_USER, "--entrypoint", "python", image,
        "-c", "import getpass; getpass.getuser()",
        check=False,
    )  # fmt: skip
    assert out.returncode == 1
    assert f"getpwuid(): uid not found: {ARBITRARY_UID}" in out.stderr


def test_the_image_leads_fires_and_hands_over_as_an_arbitrary_user(
    crd: Cluster,
    namespace: str,
    image: str,
    readable_kubeconfig: Path,
    container_name: str,
) -> None:
    port = free_port()
    podman(
        "run", "--detach", "--name", container_name, "--network", "host",
        *AS_ARBITRARY_USER,
        "--read-only", "--cap-drop", "all", "--security-opt", "no-new-privileges",
        "--volume", f"{readable_kubeconfig}:/config/kubeconfig:ro",
        "--env", "KUBECONFIG=/config/kubeconfig",
        image,
        "--namespace", namespace, "--lease-namespace", namespace, "--identity", "image",
        "--metrics-port", str(port),
        "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1",
    )  # fmt: skip

    def running() -> bool:
        state = json.loads(podman("inspect", container_name).stdout)[0]["State"]
        return bool(state["Running"])

    def logs() -> str:
        out = podman("logs", container_name, check=False)
        return out.stdout + out.stderr

    wait_until(
        lambda: leader_of(crd, namespace) == "image" or not running(),
        40,
        what="the container leads (or exits)",
    )
    assert running(), f"the container exited:\n{logs()}"
    apply(crd, namespace, schedule("from-image", "* * * * * *"))
    wait_until(
        lambda: [
            c
            for c in job_creates(crd, namespace)
            if c.code == 201 and c.user_agent == "punctual/image"
        ],
        30,
        what="a Job created by the container",
    )
    crd.kubectl("delete", "-n", namespace, "cronschedule", "from-image", "--wait=false")
    podman("stop", "--time", "20", container_name, timeout=40)
    state = json.loads(podman("inspect", container_name).stdout)[0]["State"]
    output = logs()
    assert state["ExitCode"] == 0, output
    assert "released Lease punctual-leader" in output
    assert leader_of(crd, namespace) == ""
    assert "Traceback" not in output
