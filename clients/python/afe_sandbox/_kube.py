"""The blocking calls both APIs share: the controller's custom resources
through the Kubernetes API (read, create, patch, delete, and waits from a
watch), and the access API's subresources (exec over WebSocket, files as
tars). The asynchronous backend runs them in threads (asyncio.to_thread).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Optional, Sequence

from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes import watch as kwatch
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import ws_client
import websocket
from websocket import ABNF, WebSocketConnectionClosedException

from .errors import (
    ACCESS_GROUP,
    AfeError,
    FailedError,
    NotFoundError,
    TimedOutError,
    access_reason,
    from_api_exception,
    from_status,
)

GROUP = "sandbox.afe.dev"
VERSION = "v1alpha1"
ACCESS_VERSION = "v1alpha1"

# The WebSocket subprotocol of exec, as the Python Kubernetes client speaks
# it (channels 0-3: stdin, stdout, stderr, and the error channel's Status).
EXEC_PROTOCOL = "v4.channel.k8s.io"

# A predicate of an object's version: True when the wait is over; it
# raises to end the wait with an error.
Done = Callable[[dict], bool]


def api_client(kubeconfig: Optional[str]) -> kclient.ApiClient:
    """An API client from the kubeconfig (None: KUBECONFIG or ~/.kube/config;
    in a pod without either, its service account). Its connection pool fits
    many concurrent waits: each watch holds a connection."""
    cfg = kclient.Configuration()
    try:
        kconfig.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    except kconfig.ConfigException:
        if kubeconfig is not None:
            raise
        kconfig.load_incluster_config(client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    return kclient.ApiClient(cfg)


class Kube:
    """The Kubernetes and access API calls of one namespace."""

    def __init__(self, namespace: str, kubeconfig: Optional[str] = None) -> None:
        self.namespace = namespace
        self.api = api_client(kubeconfig)
        self.custom = kclient.CustomObjectsApi(self.api)

    def get(self, plural: str, name: str) -> dict:
        """The object plural/name."""
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)
        except ApiException as e:
            raise from_api_exception(e, f"get {plural} {name}") from e

    def create(self, plural: str, body: dict) -> dict:
        """Creates the object and returns it as the API server stored it."""
        name = body["metadata"].get("name") or body["metadata"].get("generateName", "")
        try:
            return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)
        except ApiException as e:
            raise from_api_exception(e, f"create {plural} {name}") from e

    def patch(self, plural: str, name: str, patch: dict) -> dict:
        """Merge-patches the object."""
        try:
            return self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name, patch)
        except ApiException as e:
            raise from_api_exception(e, f"patch {plural} {name}") from e

    def delete(self, plural: str, name: str, timeout: float) -> None:
        """Deletes the object and waits until it is gone (the controller's
        finalizer removed what it made). Gone already is no error."""
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name, propagation_policy="Background")
            self.wait(plural, name, lambda _obj: False, timeout)
        except ApiException as e:
            err = from_api_exception(e, f"delete {plural} {name}")
            if not isinstance(err, NotFoundError):
                raise err from e
        except NotFoundError:
            pass

    def wait(self, plural: str, name: str, done: Done, timeout: float) -> dict:
        """Reads the object, then watches it until done says so, and returns
        its version then. A deleted or missing object raises NotFoundError,
        the end of timeout TimedOutError; what done raises ends the wait."""
        deadline = time.monotonic() + timeout
        while True:
            obj = self.get(plural, name)
            if done(obj):
                return obj
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOutError(f"{plural} {name} did not get there within {timeout:g}s", "DeadlineExceeded")
            found = self._watch(plural, name, obj["metadata"]["resourceVersion"], done, left)
            if found is not None:
                return found
            # The watch ended (its timeout, or the server ended it): read
            # the object again and watch on.

    def _watch(self, plural: str, name: str, rv: str, done: Done, left: float) -> Optional[dict]:
        w = kwatch.Watch()
        try:
            for ev in w.stream(self.custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, plural,
                               field_selector=f"metadata.name={name}", resource_version=rv,
                               timeout_seconds=max(1, int(left)), _request_timeout=left + 5):
                obj = ev["object"]
                if ev["type"] == "DELETED":
                    raise NotFoundError(f"{plural} {name} was deleted", "NotFound")
                if ev["type"] == "ERROR":
                    return None  # an expired resourceVersion: read again
                if done(obj):
                    return obj
        except ApiException as e:
            if e.status == 410:
                return None
            raise from_api_exception(e, f"watch {plural} {name}") from e
        finally:
            w.stop()
        return None

    def access_get(self, resource: str, name: str, what: str) -> dict:
        """The access API's resource/name in the namespace."""
        try:
            return self.custom.get_namespaced_custom_object(ACCESS_GROUP, ACCESS_VERSION, self.namespace, resource, name)
        except ApiException as e:
            raise from_status(e.status, e.body, what) from e

    def access_list(self, resource: str, label_selector: str, what: str) -> dict:
        """The access API's list of resource in the namespace, of the
        objects label_selector matches (empty: all)."""
        try:
            return self.custom.list_namespaced_custom_object(ACCESS_GROUP, ACCESS_VERSION, self.namespace, resource,
                                                             label_selector=label_selector)
        except ApiException as e:
            raise from_status(e.status, e.body, what) from e

    def access_path(self, resource: str, name: str, subresource: str) -> str:
        """The path of an access API subresource."""
        return (f"/apis/{ACCESS_GROUP}/{ACCESS_VERSION}/namespaces/{self.namespace}"
                f"/{resource}/{name}/{subresource}")

    def exec(self, sandbox: str, cmd: Sequence[str], timeout: float) -> tuple[int, ExecOutput]:
        """Runs cmd in the sandbox through the access API's exec subresource
        over WebSocket and returns its exit code and output: stdout and
        stderr (each the last EXEC_OUTPUT_MAX bytes, decoded as UTF-8 once
        whole, and whether it was cut so). The timeout bounds the handshake and every read: a stalled connection
        raises TimedOutError like a command that does not end. While the
        access API is not served (the API server's 503 while a manager
        starts) the handshake is tried again within the timeout."""
        deadline = time.monotonic() + timeout
        ws = self._open_exec(sandbox, cmd, deadline)
        try:
            output = _read_exec(ws.sock, deadline)
        except TimedOutError:
            raise TimedOutError(f"exec in sandbox {sandbox}: {list(cmd)} did not end within {timeout:g}s",
                                "DeadlineExceeded") from None
        finally:
            ws.close()
        return exit_code(output.status, sandbox), output

    def _open_exec(self, sandbox: str, cmd: Sequence[str], deadline: float) -> Any:
        """The exec's WebSocket. A handshake the API server answered 503
        (the access API's APIService not available yet, or its proxy's
        failed dial of the manager) or a refused connection reached no
        manager: it is tried again, with backoff, until deadline, unless
        the access API itself refuses the exec. Once the WebSocket is open
        nothing is tried again: a command is never run twice."""
        cfg = self.api.configuration
        path = self.access_path("sandboxes", sandbox, "exec")
        query = [("command", c) for c in cmd] + [("stdout", "true"), ("stderr", "true")]
        headers = {"sec-websocket-protocol": EXEC_PROTOCOL}
        auth = cfg.get_api_key_with_prefix("authorization")
        if auth:
            headers["authorization"] = auth
        url = ws_client.get_websocket_url(cfg.host + path, query)
        what, delay = f"exec in sandbox {sandbox}", UNAVAILABLE_FIRST_DELAY
        while True:
            left = max(deadline - time.monotonic(), 0.001)
            try:
                return _connect(cfg, url, dict(headers), left)
            except Exception as e:  # the handshake's refusal: websocket's own exceptions
                answer = self._refusal(path, query, e, what, left)
                if not _not_served(e) or answer.answered or time.monotonic() + delay >= deadline:
                    raise answer.error from e
            time.sleep(delay)
            delay = min(2 * delay, UNAVAILABLE_MAX_DELAY)

    def _refusal(self, path: str, query: list, err: Exception, what: str, timeout: float) -> "Refusal":
        """The Status the access API refused an upgrade with: the WebSocket
        handshake gives only its code, so the request is asked again as a
        POST without an upgrade, as the Go client does (a GET without one
        is refused before the sandbox is looked at). The server checks the
        caller, the sandbox and its env first and executes nothing without
        a streaming protocol; when it finds nothing to refuse, the
        handshake's status stands. Refusal.answered says the access API
        answered itself (not the API server's 503 for it, nor no answer)."""
        try:
            self.api.call_api(path, "POST", query_params=query, header_params={"Accept": "application/json"},
                              auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout)
        except ApiException as e:
            status = _json(e.body)
            reason = access_reason(status)
            if reason != "InvalidRequest":
                return Refusal(from_status(e.status, status, what), e.status != 503 or reason != "")
        except Exception:  # no answer at all (a refused connection): the handshake's error stands
            pass
        code = getattr(err, "status_code", None)
        if code == 403:
            # The API server refused the upgrade itself (a caller who may
            # create sandboxes/exec but not get it, which a WebSocket needs).
            return Refusal(from_status(code, {"message": f"{err} (an exec over WebSocket needs get on sandboxes/exec)",
                                              "details": {"causes": [{"type": "Forbidden"}]}}, what), True)
        return Refusal(from_status(code, {"message": str(err)}, what), False)

    def put_tar(self, sandbox: str, folder: str, data: bytes, timeout: float) -> None:
        """Extracts the tar into the workspace folder (which must exist)."""
        self._call(sandbox, "POST", folder, timeout, body=data, what=f"put files into {sandbox}:{folder}")

    def get_tar(self, sandbox: str, path: str, timeout: float) -> bytes:
        """A tar of the workspace path."""
        return self._call(sandbox, "GET", path, timeout, what=f"get {sandbox}:{path}")

    def _call(self, sandbox: str, method: str, path: str, timeout: float, what: str,
              body: Optional[bytes] = None) -> bytes:
        headers = {"Accept": "application/x-tar, application/json"}
        if body is not None:
            headers["Content-Type"] = "application/x-tar"
        try:
            resp = self.api.call_api(self.access_path("sandboxes", sandbox, "files"), method,
                                     query_params=[("path", path)], header_params=headers, body=body,
                                     auth_settings=["BearerToken"], _preload_content=False,
                                     _request_timeout=timeout)
        except ApiException as e:
            raise from_status(e.status, e.body, what) from e
        return resp[0].data


# The backoff between the handshakes of an exec the access API did not get
# because it is not served (seconds).
UNAVAILABLE_FIRST_DELAY = 0.1
UNAVAILABLE_MAX_DELAY = 1.0


class Refusal(NamedTuple):
    """The error an exec's refused handshake raises, and whether the access
    API gave it itself (rather than the API server's 503 for an access API
    not served, or no answer)."""

    error: AfeError
    answered: bool


def _not_served(err: Exception) -> bool:
    """Whether a failed handshake certainly reached no manager because the
    access API is not served now: the API server answered 503 (its
    APIService not available, or its proxy's dial of the manager failed),
    or the connection was refused."""
    return getattr(err, "status_code", None) == 503 or isinstance(err, ConnectionRefusedError)


# _handshakes serializes the handshakes, whose timeout websocket-client
# takes only from its process-wide default.
_handshakes = threading.Lock()


def _connect(cfg: Any, url: str, headers: dict, timeout: float) -> Any:
    """The WebSocket of an exec, its handshake bounded by timeout (a
    stalled API server raises instead of hanging)."""
    with _handshakes:
        previous = websocket.getdefaulttimeout()
        websocket.setdefaulttimeout(timeout)
        try:
            return ws_client.WSClient(cfg, url, headers, capture_all=False)
        finally:
            websocket.setdefaulttimeout(previous)


# EXEC_OUTPUT_MAX bounds what an exec keeps of each of stdout and stderr:
# its last bytes. A workload that prints without end cannot exhaust the
# caller's memory.
EXEC_OUTPUT_MAX = 16 << 20


@dataclass(frozen=True)
class ExecOutput:
    """What an exec printed, as _read_exec read it: stdout and stderr (each
    its last EXEC_OUTPUT_MAX bytes, decoded), whether each lost its
    beginning to that bound, and the error channel's Status."""

    stdout: str
    stderr: str
    status: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False


def _read_exec(sock: Any, deadline: float) -> ExecOutput:
    """Reads an exec's frames until its status (channel 3, the last frame
    the server sends) or the connection's end: stdout and stderr as bytes
    joined before they are decoded (a character split across frames stays
    whole), each bounded to its last EXEC_OUTPUT_MAX bytes, and said
    truncated when it lost its beginning so."""
    streams = {ws_client.STDOUT_CHANNEL: bytearray(), ws_client.STDERR_CHANNEL: bytearray()}
    cut = {ws_client.STDOUT_CHANNEL: False, ws_client.STDERR_CHANNEL: False}
    status = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimedOutError("the exec did not end in time", "DeadlineExceeded")
        ready, _, _ = select.select([sock.sock], [], [], min(left, 1.0))
        pending = getattr(sock.sock, "pending", None)  # TLS records read but not yet returned
        if not ready and not (pending and pending()):
            continue
        sock.sock.settimeout(max(left, 0.001))
        try:
            op, frame = sock.recv_data_frame(True)
        except (socket.timeout, TimeoutError):
            raise TimedOutError("the exec did not end in time", "DeadlineExceeded") from None
        except WebSocketConnectionClosedException:
            break
        if op == ABNF.OPCODE_CLOSE:
            break
        if op not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or len(frame.data) < 1:
            continue
        data = frame.data if isinstance(frame.data, (bytes, bytearray)) else frame.data.encode("utf-8")
        channel, payload = data[0], data[1:]
        if channel == ws_client.ERROR_CHANNEL:
            status += payload
            break
        buf = streams.get(channel)
        if buf is not None:
            buf += payload
            if len(buf) > EXEC_OUTPUT_MAX:
                del buf[:len(buf) - EXEC_OUTPUT_MAX]
                cut[channel] = True
    decode = lambda b: bytes(b).decode("utf-8", "replace")  # noqa: E731
    return ExecOutput(stdout=decode(streams[ws_client.STDOUT_CHANNEL]), stderr=decode(streams[ws_client.STDERR_CHANNEL]),
                      status=decode(status), stdout_truncated=cut[ws_client.STDOUT_CHANNEL],
                      stderr_truncated=cut[ws_client.STDERR_CHANNEL])


def exit_code(error_channel: str, sandbox: str) -> int:
    """The exit code in the Status of the exec's error channel: Success is
    0, a NonZeroExitCode failure carries it as the ExitCode cause; any other
    failure is an error."""
    status = _json(error_channel)
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            return int(cause["message"])
    if not status:
        raise FailedError(f"exec in sandbox {sandbox}: the stream ended with no status")
    raise from_status(status.get("code"), status, f"exec in sandbox {sandbox}")


def _json(text: Any) -> dict:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return {"message": str(text)}
    return parsed if isinstance(parsed, dict) else {}
