"""Who the API server takes the caller to be: its SelfSubjectReview, as `kubectl auth whoami`.

Why it exists: `punctual trigger` records who asked for a manual firing. The only name
worth recording is the one the API server authenticated (a kubeconfig's user entry is
just a label), and the API server says it in a SelfSubjectReview
(`authentication.k8s.io/v1`, Kubernetes 1.28+; nothing but the request is needed, and
every authenticated user may create one).

What it must never do: guess a name. When the API server cannot say (older than 1.28,
or the API turned off), it raises, and the caller records nobody.
"""

from __future__ import annotations

from typing import Final

from punctual.kube.client import Api, ApiError

PATH: Final = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


async def caller_name(api: Api) -> str:
    """The authenticated user name of `api`'s credentials, e.g. `admin` or
    `system:serviceaccount:ci:deployer`; ApiError if the API server cannot say."""
    review = await api.create(
        PATH, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    name = ((review.get("status") or {}).get("userInfo") or {}).get("username")
    if not isinstance(name, str) or not name:
        raise ApiError(200, "OK", "the SelfSubjectReview names no user")
    return name
