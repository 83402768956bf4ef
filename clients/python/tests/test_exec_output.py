"""An exec's output as the client reads it from the WebSocket's frames:
each stream bounded to its last EXEC_OUTPUT_MAX bytes, and said cut when it
was (no control plane needed)."""

from __future__ import annotations

import json
import socket
import time
from types import SimpleNamespace

from kubernetes.stream import ws_client
from websocket import ABNF

from afe_sandbox import ExecResult
from afe_sandbox._kube import EXEC_OUTPUT_MAX, _read_exec

MIB = 1 << 20
SUCCESS = json.dumps({"metadata": {}, "status": "Success"}).encode()


class FakeExecSocket:
    """The frames a server sends, channel byte first; sock is a socket that
    always reads ready, as the client selects on it."""

    def __init__(self, frames: list[tuple[int, bytes]]) -> None:
        self._frames = list(frames)
        self.sock, self._peer = socket.socketpair()
        self._peer.send(b"x")

    def recv_data_frame(self, _control: bool) -> tuple[int, SimpleNamespace]:
        if not self._frames:
            return ABNF.OPCODE_CLOSE, SimpleNamespace(data=b"")
        channel, payload = self._frames.pop(0)
        return ABNF.OPCODE_BINARY, SimpleNamespace(data=bytes([channel]) + payload)

    def close(self) -> None:
        self.sock.close()
        self._peer.close()


def read(stdout: bytes, stderr: bytes = b"") -> object:
    frames = [(ws_client.STDOUT_CHANNEL, stdout[i:i + MIB]) for i in range(0, len(stdout), MIB)]
    frames += [(ws_client.STDERR_CHANNEL, stderr), (ws_client.ERROR_CHANNEL, SUCCESS)]
    sock = FakeExecSocket(frames)
    try:
        return _read_exec(sock, time.monotonic() + 60)
    finally:
        sock.close()


def test_stdout_cut_at_the_bound_says_so() -> None:
    out = read(b"a" * MIB + b"b" * EXEC_OUTPUT_MAX, b"err\n")
    assert len(out.stdout) == EXEC_OUTPUT_MAX and set(out.stdout) == {"b"}, "the last bytes are kept"
    assert (out.stdout_truncated, out.stderr_truncated) == (True, False)
    assert out.stderr == "err\n" and json.loads(out.status)["status"] == "Success"


def test_output_at_the_bound_is_whole() -> None:
    out = read(b"a" * EXEC_OUTPUT_MAX)
    assert len(out.stdout) == EXEC_OUTPUT_MAX
    assert (out.stdout_truncated, out.stderr_truncated) == (False, False)


def test_stderr_cut_says_so() -> None:
    out = read(b"out\n", b"e" * (EXEC_OUTPUT_MAX + 1))
    assert (out.stdout_truncated, out.stderr_truncated) == (False, True)


def test_an_exec_result_is_whole_unless_told() -> None:
    res = ExecResult(cmd=["true"], returncode=0, stdout="", stderr="", duration_s=0.1)
    assert (res.stdout_truncated, res.stderr_truncated) == (False, False)
