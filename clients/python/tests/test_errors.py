"""The error channel's Status and the access API's refusals, typed."""

from __future__ import annotations

import json

import pytest
from websocket import WebSocketBadStatusException, WebSocketConnectionClosedException

from afe_sandbox import FailedError, ForbiddenError, NotFoundError, NotReadyError, SpecRefusedError
from afe_sandbox._kube import _not_served, exit_code
from afe_sandbox.errors import from_status


def test_exit_code_of_the_error_channel() -> None:
    assert exit_code(json.dumps({"metadata": {}, "status": "Success"}), "s") == 0
    nonzero = {"status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated with non-zero exit code",
               "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    assert exit_code(json.dumps(nonzero), "s") == 3
    with pytest.raises(FailedError):
        exit_code("", "s")
    with pytest.raises(NotReadyError) as e:
        exit_code(json.dumps({"status": "Failure", "code": 409, "message": "not ready",
                              "details": {"group": "access.sandbox.afe.dev", "causes": [{"reason": "SandboxNotReady"}]}}), "s")
    assert e.value.reason == "SandboxNotReady"


def access_refusal(code: int, reason: str) -> str:
    return json.dumps({"kind": "Status", "code": code, "message": "refused",
                       "details": {"group": "access.sandbox.afe.dev", "causes": [{"reason": reason}]}})


@pytest.mark.parametrize("code,body,cls,reason", [
    (404, access_refusal(404, "SandboxNotFound"), NotFoundError, "SandboxNotFound"),
    (400, access_refusal(400, "PathNotFound"), NotFoundError, "PathNotFound"),
    (503, access_refusal(503, "NodeUnavailable"), NotReadyError, "NodeUnavailable"),
    (403, json.dumps({"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"}), ForbiddenError, "Forbidden"),
    (422, json.dumps({"kind": "Status", "code": 422, "reason": "Invalid", "message": "bad"}), SpecRefusedError, "Invalid"),
    (503, "service unavailable", NotReadyError, ""),
    (500, "not json", FailedError, ""),
])
def test_from_status(code: int, body: str, cls: type, reason: str) -> None:
    err = from_status(code, body, "what")
    assert type(err) is cls
    assert err.reason == reason
    assert str(err).startswith("what: ")


def test_only_a_handshake_that_reached_no_manager_is_tried_again() -> None:
    # The API server's 503 to the upgrade, a refused connection: no manager
    # got the exec. A refusal of another code, or a stream that opened and
    # broke, may have run it: never again.
    assert _not_served(WebSocketBadStatusException("Handshake status %d %s", 503, "Service Unavailable"))
    assert _not_served(ConnectionRefusedError(111, "Connection refused"))
    assert not _not_served(WebSocketBadStatusException("Handshake status %d %s", 403, "Forbidden"))
    assert not _not_served(WebSocketBadStatusException("Handshake status %d %s", 500, "Internal Server Error"))
    assert not _not_served(WebSocketConnectionClosedException("closed"))
