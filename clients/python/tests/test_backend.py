"""KubernetesBackend, the sandbox port, against the controller and the real
engine: the whole lifecycle, the limits enforced, the Protocol at runtime,
refusals with their reasons, and many sandboxes from one event loop."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest
from kubernetes import client as kclient

import afe_sandbox
from afe_sandbox import (
    ExecResult,
    ForbiddenError,
    KubernetesBackend,
    NotFoundError,
    ResourceLimits,
    SandboxBackend,
    SandboxHandle,
    SandboxSpec,
    SpecRefusedError,
    TimedOutError,
)
from afe_sandbox._kube import EXEC_OUTPUT_MAX
from afe_sandbox.backend import LEARNER_LABEL


def test_the_backend_is_a_sandbox_backend(backend: KubernetesBackend) -> None:
    assert isinstance(backend, SandboxBackend)

    class NoDestroy:
        async def spawn(self, spec: SandboxSpec) -> SandboxHandle: ...
        async def exec(self, handle: SandboxHandle, cmd: list[str]) -> ExecResult: ...
        async def snapshot(self, handle: SandboxHandle) -> str: ...

    assert not isinstance(NoDestroy(), SandboxBackend), "the Protocol checks all four methods"


def test_spawn_exec_snapshot_destroy(backend: KubernetesBackend, namespace: str) -> None:
    async def scenario() -> None:
        spec = SandboxSpec(sandbox_id="py-life", learner_id="learner@example.com", workdir="proj",
                           limits=ResourceLimits(memory_bytes=64 << 20, cpu_seconds=60, file_size_bytes=8 << 20))
        handle = await backend.spawn(spec)
        try:
            assert handle.id == "py-life" and handle.workdir == "/workspace/proj"
            assert abs(datetime.now(timezone.utc) - handle.created_at) < timedelta(minutes=5)
            sbx = kclient.CustomObjectsApi(backend._kube.api).get_namespaced_custom_object(
                "sandbox.afe.dev", "v1alpha1", namespace, "sandboxes", handle.id)
            assert sbx["metadata"]["labels"][LEARNER_LABEL].startswith("learner_example.com-")
            assert sbx["spec"]["resources"]["memory"] == str(64 << 20)
            assert sbx["spec"]["resources"]["cpuSeconds"] == 60
            assert sbx["spec"]["resources"]["fileSize"] == str(8 << 20)

            res = await backend.exec(handle, ["sh", "-c", "echo out; echo err >&2; exit 3"])
            assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")
            assert res.cmd == ["sh", "-c", "echo out; echo err >&2; exit 3"] and res.duration_s > 0
            res = await backend.exec(handle, ["sh", "-c", "pwd; echo kept > note.txt"])
            assert (res.returncode, res.stdout, res.stderr) == (0, "/workspace/proj\n", "")

            ref = await backend.snapshot(handle)
            assert isinstance(ref, str) and ref
            sbx = kclient.CustomObjectsApi(backend._kube.api).get_namespaced_custom_object(
                "sandbox.afe.dev", "v1alpha1", namespace, "sandboxes", handle.id)
            assert ref in [s["name"] for s in sbx["status"]["snapshots"]]

            await backend.destroy(handle)
            await backend.destroy(handle)
            with pytest.raises(NotFoundError) as e:
                await backend.exec(handle, ["true"])
            assert e.value.reason == "SandboxNotFound"
        finally:
            await backend.destroy(handle)  # idempotent: leaves nothing when an assertion failed

    asyncio.run(scenario())


def test_limits_are_enforced(backend: KubernetesBackend) -> None:
    async def scenario() -> None:
        handle = await backend.spawn(SandboxSpec("py-limits", "learner", "/workspace",
                                                 ResourceLimits(memory_bytes=32 << 20, cpu_seconds=2,
                                                                file_size_bytes=1 << 20)))
        try:
            hog = await backend.exec(handle, ["awk", 'BEGIN { s = "0123456789abcdef"; while (1) s = s s }'])
            assert hog.returncode == 137, hog
            big = await backend.exec(handle, ["sh", "-c", "head -c 2000000 /dev/zero > big"])
            # head does not ignore SIGXFSZ: it dies of it (128 + 25); a
            # writer that ignores it gets EFBIG, "File too large".
            assert big.returncode == 128 + 25 or "File too large" in big.stderr, big
            kept = await backend.exec(handle, ["sh", "-c", "wc -c < big"])
            assert int(kept.stdout) <= 1 << 20, "nothing past the limit was written"
            small = await backend.exec(handle, ["sh", "-c", "head -c 500000 /dev/zero > small && wc -c < small"])
            assert (small.returncode, small.stdout.strip()) == (0, "500000")
            spin = await backend.exec(handle, ["sh", "-c", "while :; do :; done"], timeout=60)
            assert spin.returncode in (128 + 24, 137), f"SIGXCPU, then SIGKILL: {spin}"
        finally:
            await backend.destroy(handle)

    asyncio.run(scenario())


def test_exec_output_is_whole_text_and_bounded(backend: KubernetesBackend) -> None:
    async def scenario() -> None:
        handle = await backend.spawn(SandboxSpec("py-output", "learner"))
        try:
            # 7-byte lines of 3-byte characters: the frames' boundaries fall
            # inside characters, which must come out whole.
            text = await backend.exec(handle, ["sh", "-c", "yes '\u20ac\u20ac' | head -n 100000"])
            assert (text.returncode, text.stdout == "\u20ac\u20ac\n" * 100000, text.stdout_truncated) == (0, True, False)
            # A workload printing more than the bound: the caller keeps its
            # last EXEC_OUTPUT_MAX bytes, not all of it.
            flood = await backend.exec(handle, ["sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' a"])
            assert flood.returncode == 0
            assert len(flood.stdout) == EXEC_OUTPUT_MAX and set(flood.stdout) == {"a"}
            assert (flood.stdout_truncated, flood.stderr_truncated) == (True, False), "the cut is said"
        finally:
            await backend.destroy(handle)

    asyncio.run(scenario())


def test_an_exec_past_its_timeout_raises(backend: KubernetesBackend) -> None:
    async def scenario() -> None:
        handle = await backend.spawn(SandboxSpec("py-timeout", "learner"))
        try:
            start = time.monotonic()
            with pytest.raises(TimedOutError) as e:
                await backend.exec(handle, ["sleep", "30"], timeout=2)
            assert e.value.reason == "DeadlineExceeded"
            assert time.monotonic() - start < 15
        finally:
            await backend.destroy(handle)

    asyncio.run(scenario())


def test_a_refused_spec_raises_with_the_reason(namespace: str) -> None:
    async def scenario() -> None:
        kata = KubernetesBackend(namespace=namespace, image="afe/busybox:dev", runtime="kata")
        with pytest.raises(SpecRefusedError) as e:
            await kata.spawn(SandboxSpec("py-kata", "learner"))
        assert e.value.reason == "RuntimeNotAllowed", e.value
        plain = KubernetesBackend(namespace=namespace, image="afe/busybox:dev")
        with pytest.raises(NotFoundError):
            await plain.exec(SandboxHandle("py-kata", "/workspace", datetime.now(timezone.utc)), ["true"])
        with pytest.raises(SpecRefusedError) as e:
            await plain.spawn(SandboxSpec("py-tiny", "learner", limits=ResourceLimits(memory_bytes=1024)))
        assert e.value.reason == "Invalid" and "memory" in str(e.value)

    asyncio.run(scenario())


def test_a_spawn_not_ready_in_time_raises_with_the_reason_and_leaves_nothing(namespace: str) -> None:
    async def scenario() -> None:
        # A registry address nothing listens on (loopback): the pull fails at
        # once, and no test reaches outside the machine.
        missing = KubernetesBackend(namespace=namespace, image="127.0.0.1:1/afe/no-such-image:dev", spawn_timeout=30)
        start = time.monotonic()
        with pytest.raises(TimedOutError) as e:
            await missing.spawn(SandboxSpec("py-no-image", "learner"))
        assert e.value.reason == "ImagePullFailed", e.value
        assert time.monotonic() - start < 60
        with pytest.raises(NotFoundError):
            await asyncio.to_thread(missing._kube.get, "sandboxes", "py-no-image")

    asyncio.run(scenario())


def test_another_namespace_is_forbidden(backend: KubernetesBackend) -> None:
    async def scenario() -> None:
        other = KubernetesBackend(namespace="default", image="afe/busybox:dev")
        with pytest.raises(ForbiddenError) as e:
            await other.spawn(SandboxSpec("py-elsewhere", "learner"))
        assert e.value.reason == "Forbidden"
        with pytest.raises(ForbiddenError):
            await other.exec(SandboxHandle("py-elsewhere", "/workspace", datetime.now(timezone.utc)), ["true"])

    asyncio.run(scenario())


def test_a_missing_sandbox_raises(backend: KubernetesBackend) -> None:
    async def scenario() -> None:
        ghost = SandboxHandle("py-never-spawned", "/workspace", datetime.now(timezone.utc))
        with pytest.raises(NotFoundError) as e:
            await backend.exec(ghost, ["true"])
        assert e.value.reason == "SandboxNotFound"
        with pytest.raises(NotFoundError) as e:
            await backend.snapshot(ghost)
        assert e.value.reason == "SandboxNotFound"
        await backend.destroy(ghost)

    asyncio.run(scenario())


def test_twenty_concurrent_spawns_and_execs(backend: KubernetesBackend) -> None:
    n = 20

    async def scenario() -> None:
        # Each call holds a thread (a watch, a WebSocket): more than the
        # default executor's min(32, cores + 4).
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * n))
        start = time.monotonic()
        handles = await asyncio.gather(*(backend.spawn(SandboxSpec(f"py-many-{i}", f"learner-{i}"))
                                         for i in range(n)))
        spawned = time.monotonic()
        try:
            results = await asyncio.gather(*(backend.exec(h, ["sh", "-c", f"sleep 2; echo {i}"])
                                             for i, h in enumerate(handles)))
            execs = time.monotonic() - spawned
        finally:
            await asyncio.gather(*(backend.destroy(h) for h in handles))
        print(f"\n{n} sandboxes from one loop: spawned in {spawned - start:.1f}s, "
              f"{n} execs of sleep 2 in {execs:.1f}s, destroyed in {time.monotonic() - spawned - execs:.1f}s")
        assert [(r.returncode, r.stdout) for r in results] == [(0, f"{i}\n") for i in range(n)]
        assert execs < n * 2 / 2, "the execs ran at once, not one after the other"

    asyncio.run(scenario())


def test_the_package_exports_the_port() -> None:
    for name in ("ResourceLimits", "SandboxSpec", "SandboxHandle", "ExecResult", "SandboxBackend",
                 "KubernetesBackend"):
        assert hasattr(afe_sandbox, name)
    assert ResourceLimits(1, 2, 3) == ResourceLimits(memory_bytes=1, cpu_seconds=2, file_size_bytes=3)
    assert SandboxSpec("a", "b", "c", ResourceLimits()).workdir == "c"
    r = ExecResult(["true"], 0, "", "", 0.1)
    assert (r.cmd, r.returncode, r.stdout, r.stderr, r.duration_s) == (["true"], 0, "", "", 0.1)
