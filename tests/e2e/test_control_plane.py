"""Smoke tests: the control plane under test is real and behaves as Kubernetes does.

Each test checks one API-server behaviour that Punctual's guarantees rest on, so that a
broken fixture (or a server that is not the real one) fails here first and loudly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import socket
import ssl
import struct
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from punctual.kube.client import AlreadyExists, Conflict, KubeClient

from .conftest import REPO, Cluster
from .operators import existed
from .waiting import condition, wait_for

pytestmark = pytest.mark.e2e

SMOKE_GROUP = "smoke.punctual.dev"
SMOKE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{SMOKE_GROUP}"},
    "spec": {
        "group": SMOKE_GROUP,
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "properties": {"cursor": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def pinned_kubernetes_version() -> str:
    go_mod = (REPO / "e2e" / "tools" / "kubernetes" / "go.mod").read_text()
    match = re.search(r"^require k8s\.io/kubernetes (v\S+)$", go_mod, re.M)
    assert match, "e2e/tools/kubernetes/go.mod pins no k8s.io/kubernetes version"
    return match.group(1)


def job(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                },
            },
        },
    }


async def test_server_runs_the_pinned_kubernetes_version(api: KubeClient, cluster: Cluster) -> None:
    version = await api.get("/version")
    if cluster.local is None:
        pytest.skip("a cluster given by KUBECONFIG runs whatever version it runs")
    assert version["gitVersion"] == pinned_kubernetes_version()


async def test_kubectl_is_the_pinned_version_and_sees_a_ready_node(cluster: Cluster) -> None:
    client = cluster.kubectl("version", "--client", "-o", "json").stdout
    assert pinned_kubernetes_version() in client
    nodes = cluster.kubectl("get", "nodes", "--no-headers").stdout
    assert re.search(r"\sReady\s", nodes), nodes


async def test_crd_with_status_subresource_becomes_established(api: KubeClient) -> None:
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    with contextlib.suppress(AlreadyExists):
        await api.create(path, SMOKE_CRD)
    crd = await wait_for(
        lambda: api.get(f"{path}/widgets.{SMOKE_GROUP}"),
        lambda crd: condition(crd, "Established") == "True",
    )
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


async def test_status_patch_with_stale_resource_version_gets_409_conflict(
    api: KubeClient, namespace: str
) -> None:
    await test_crd_with_status_subresource_becomes_established(api)
    base = f"/apis/{SMOKE_GROUP}/v1/namespaces/{namespace}/widgets"
    widget = await wait_for(
        lambda: api.create(
            base,
            {
                "apiVersion": f"{SMOKE_GROUP}/v1",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {},
            },
        ),
        lambda _: True,
        retry_on=(Exception,),
    )
    stale = widget["metadata"]["resourceVersion"]
    first = await api.patch(
        f"{base}/w/status",
        {"metadata": {"resourceVersion": stale}, "status": {"cursor": "one"}},
    )
    assert first["status"]["cursor"] == "one"
    with pytest.raises(Conflict) as err:
        await api.patch(
            f"{base}/w/status",
            {"metadata": {"resourceVersion": stale}, "status": {"cursor": "two"}},
        )
    assert err.value.status == 409
    assert (await api.get(f"{base}/w"))["status"]["cursor"] == "one"


async def test_creating_a_job_twice_gets_409_already_exists(
    api: KubeClient, namespace: str
) -> None:
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    await api.create(path, job("twice"))
    with pytest.raises(AlreadyExists) as err:
        await api.create(path, job("twice"))
    assert (err.value.status, err.value.reason) == (409, "AlreadyExists")


async def test_job_runs_to_complete_on_a_kwok_node(api: KubeClient, namespace: str) -> None:
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    await api.create(path, job("runs", **{"pod-complete.stage.kwok.x-k8s.io/delay": "500ms"}))
    started = time.monotonic()
    done = await wait_for(
        lambda: api.get(f"{path}/runs"),
        lambda j: condition(j, "Complete") == "True",
        timeout=60,
    )
    assert done["status"]["succeeded"] == 1
    pods = await api.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="job-name=runs")
    assert pods["items"][0]["spec"]["nodeName"].startswith("kwok-node-")
    assert time.monotonic() - started < 60


async def test_lease_is_created_then_updated_with_its_resource_version(
    api: KubeClient, namespace: str
) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    lease = await api.create(
        path,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0},
        },
    )
    lease["spec"]["holderIdentity"] = "b"
    lease["spec"]["leaseTransitions"] = 1
    updated = await api.replace(f"{path}/leader", lease)
    assert updated["spec"]["holderIdentity"] == "b"
    assert updated["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]
    with pytest.raises(Conflict):
        await api.replace(f"{path}/leader", lease)  # still carries the old resourceVersion


async def test_audit_log_records_the_job_create(
    api: KubeClient, namespace: str, cluster: Cluster
) -> None:
    if cluster.audit_log is None:
        pytest.skip("the audit log is only known for a local cluster")
    name = f"audited-{uuid.uuid4().hex[:6]}"
    await api.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job(name))

    def creates() -> list[dict[str, Any]]:
        return [
            e
            for e in cluster.audit_events()
            if e["verb"] == "create"
            and e["objectRef"].get("resource") == "jobs"
            and e["objectRef"].get("namespace") == namespace
            and e["objectRef"].get("name") == name
        ]

    async def read() -> list[dict[str, Any]]:
        return creates()

    events = await wait_for(read, lambda found: len(found) > 0, timeout=10)
    assert len(events) == 1
    assert events[0]["responseStatus"]["code"] == 201
    assert events[0]["user"]["username"] == "admin"
    assert Path(cluster.audit_log).stat().st_size > 0


async def test_a_create_cut_off_mid_request_can_exist_though_audited_as_failed(
    api: KubeClient, namespace: str, cluster: Cluster
) -> None:
    """A client killed while its create is in flight (kill -9 of a leader) ends the
    request's context: the API server audits a failure (504) and yet the Job may be
    committed. The kill tests' oracle (operators.existed) rests on this: at least once
    is judged by the Jobs that existed, at most once by 201s."""
    if cluster.audit_log is None:
        pytest.skip("the audit log is only known for a local cluster")
    credentials = cluster.credentials()
    server = urlparse(credentials.server)
    token = credentials.token or ""
    tls = ssl.create_default_context(cafile=credentials.ca_file)
    tls.check_hostname = False
    prefix = f"cut-{uuid.uuid4().hex[:6]}"
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    evidence: list[str] = []
    for batch in range(12):
        for i in range(50):
            body = json.dumps(job(f"{prefix}-{batch * 50 + i}")).encode()
            head = (
                f"POST {path} HTTP/1.1\r\nHost: {server.hostname}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            raw = socket.create_connection((server.hostname or "", server.port or 443))
            with tls.wrap_socket(raw, server_hostname=server.hostname) as conn:
                conn.sendall(head.encode() + body)
                time.sleep(random.uniform(0, 0.004))
                # A reset, not a goodbye: as the kernel closes a killed process's sockets.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await asyncio.sleep(1)
        listed = await api.get(path)
        exists = {j["metadata"]["name"] for j in listed["items"]}
        failed = {
            e["objectRef"]["name"]
            for e in cluster.audit_events()
            if e["verb"] == "create"
            and e["objectRef"].get("namespace") == namespace
            and e["objectRef"].get("name", "").startswith(prefix)
            and e["responseStatus"]["code"] != 201
        }
        evidence = sorted(failed & exists)
        if evidence:
            break
    assert evidence, "no cut-off create was committed in 600 tries"
    print(f"\n{len(evidence)} Jobs exist whose create was audited as failed, e.g. {evidence[0]}")
    # The oracle reads "it existed" from a later write to the Job (the operator's
    # finalizer release, the history limit's delete), here a label.
    for name in evidence:
        await api.patch(f"{path}/{name}", {"metadata": {"labels": {"seen": "yes"}}})
    assert set(evidence) <= existed(cluster, namespace, prefix)
