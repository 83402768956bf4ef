"""The package installs as the README says, with Debian's pip and
setuptools and no package index: pip install --no-build-isolation, here in
a venv that sees Debian's packages (Debian refuses a pip install into its
own Python, PEP 668)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def test_pip_installs_the_typed_package(tmp_path: Path) -> None:
    # A copy: setuptools builds in the source tree (build/, egg-info).
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", str(src)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import pathlib, afe_sandbox; p = pathlib.Path(afe_sandbox.__file__).parent; "
                            "print(p.parent.name, (p / 'py.typed').exists(), "
                            "isinstance(afe_sandbox.KubernetesBackend.__new__(afe_sandbox.KubernetesBackend), "
                            "afe_sandbox.SandboxBackend))"],
                           capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout == "site-packages True True\n"
