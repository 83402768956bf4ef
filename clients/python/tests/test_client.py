"""Client, the synchronous API beyond the port: tickets with egress, Runs
with their JSON result, files both ways, merges with CI, what sandboxes
use, and the README's example as it is written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from afe_sandbox import Client, ForbiddenError, NotFoundError, SandboxUsage, TimedOutError

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "readme.py"


def test_a_ticket_with_egress_runs_a_script_with_a_json_result(client: Client, egress_host: str) -> None:
    tk = client.create_ticket("py-egress", egress=[egress_host])
    assert tk["status"]["phase"] == "Ready"
    try:
        out = client.run("py-egress", script=f'page=$(timeout 20 wget -qO- http://{egress_host}/); '
                                              'echo "{\\"page\\": \\"$page\\"}"; echo not json')
        assert (out.ok, out.exit_code, out.result) == (True, 0, {"page": "hello-from-test-web"})
        denied = client.run("py-egress", script="timeout 20 wget -qO- http://denied.test/")
        assert not denied.ok and denied.exit_code != 0, "a host not on the allowlist is refused"
        failing = client.run("py-egress", command=["sh", "-c", "echo partial; exit 4"])
        assert (failing.ok, failing.exit_code, failing.output) == (False, 4, "partial\n")
        with pytest.raises(TimedOutError) as e:
            client.run("py-egress", script="sleep 30", timeout=2)
        assert e.value.reason == "TimedOut"
        done = client.finish("py-egress")
        assert done["status"]["phase"] == "Finished"
    finally:
        client.delete_ticket("py-egress")


def test_files_go_in_and_out(client: Client) -> None:
    client.create_sandbox("py-files")
    try:
        data = bytes(range(256)) * 4096
        client.put_file("py-files", "/workspace/blob.bin", data, mode=0o600)
        assert client.get_file("py-files", "/workspace/blob.bin") == data
        out = client.run("py-files", script="stat -c '%a %s' blob.bin")
        assert out.output == f"600 {len(data)}\n"
        listed = client.exec("py-files", ["sh", "-c", "ls; echo gone >&2; exit 2"])
        assert (listed.returncode, listed.stdout, listed.stderr) == (2, "blob.bin\n", "gone\n")
        with pytest.raises(NotFoundError) as e:
            client.get_file("py-files", "/workspace/missing")
        assert e.value.reason == "PathNotFound"
    finally:
        client.delete_sandbox("py-files")
        client.delete_sandbox("py-files")


def test_merge_and_ci(client: Client) -> None:
    client.create_sandbox("py-lanes", image="afe/git:dev", user="1000:1000")
    try:
        setup = client.run("py-lanes", script="""set -e
cd /workspace && git init -q -b main repo && cd repo && echo base > base.txt
git add -A && git -c user.name=t -c user.email=t@t commit -qm base
git worktree add -q -b a ../lanes/a && git worktree add -q -b b ../lanes/b
echo a > ../lanes/a/a.txt && echo b > ../lanes/b/b.txt""")
        assert setup.ok, setup.output
        report = client.merge_and_ci("py-lanes", ["a", "b"], "test -f a.txt && test -f b.txt && echo ci-ok",
                                     base_ref="main")
        assert report.ok, report
        assert report.result["merged"] is True and report.result["ci_passed"] is True
        assert "ci-ok" in report.result["ci_output"]
        failing = client.merge_and_ci("py-lanes", ["a"], "exit 1", base_ref="main", integration_branch="other")
        assert not failing.ok and failing.result["ci_passed"] is False
    finally:
        client.delete_sandbox("py-lanes")


def test_usage_as_the_manager_measured_it(client: Client) -> None:
    client.create_sandbox("py-usage")
    try:
        client.exec("py-usage", ["sh", "-c", "dd if=/dev/zero of=/workspace/data bs=1M count=2 2>/dev/null"])
        # The manager measures every --usage-period (30 s here).
        deadline, used = time.monotonic() + 90, None
        while used is None or used.workspace_bytes < 2 << 20:
            try:
                used = client.usage("py-usage")
            except NotFoundError as e:
                assert e.reason == "UsageNotMeasured", e
            assert time.monotonic() < deadline, f"no figures of py-usage's 2 MiB: {used}"
            time.sleep(1)
        assert isinstance(used, SandboxUsage) and used.sandbox == "py-usage" and used.ticket == ""
        assert used.uid == client._kube.get("sandboxes", "py-usage")["metadata"]["uid"]
        assert used.memory_bytes > 0 and used.window_s == 30
        assert used.disk_bytes == used.writable_layer_bytes + used.workspace_bytes
        assert "py-usage" in [u.sandbox for u in client.usages()]
        assert client.usages(selector="nothing=here") == []
        with pytest.raises(NotFoundError) as e:
            client.usage("py-none")
        assert e.value.reason == "SandboxNotFound"
        with pytest.raises(ForbiddenError):
            Client(namespace="default").usages()
    finally:
        client.delete_sandbox("py-usage")


def test_the_readme_example_as_written() -> None:
    env = dict(os.environ, PYTHONPATH=str(EXAMPLE.parent.parent))
    try:
        proc = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "0 20\n", "exit 0, and the page's 20 bytes: hello-from-test-web and its newline"
    finally:
        Client(namespace=os.environ["AFE_NAMESPACE"]).delete_ticket("fix-1234")
