"""Fixtures of the Python client's tests. They run against the control
plane of KUBECONFIG, in the namespace AFE_NAMESPACE, as python_test.go
sets them up (a user bound to afe-sandbox-user there, a manager serving
the access API, and a web server reachable as AFE_EGRESS_HOST)."""

from __future__ import annotations

import os

import pytest

import afe_sandbox

IMAGE = "afe/busybox:dev"


@pytest.fixture(scope="session")
def namespace() -> str:
    return os.environ["AFE_NAMESPACE"]


@pytest.fixture(scope="session")
def egress_host() -> str:
    return os.environ["AFE_EGRESS_HOST"]


@pytest.fixture(scope="session")
def backend(namespace: str) -> afe_sandbox.KubernetesBackend:
    return afe_sandbox.KubernetesBackend(namespace=namespace, image=IMAGE)


@pytest.fixture(scope="session")
def client(namespace: str) -> afe_sandbox.Client:
    return afe_sandbox.Client(namespace=namespace)
