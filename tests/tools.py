"""The external programs some tests call (Debian packages of the same names):
bcftools and tabix (reading outputs back), beagle and shapeit4 (phasing),
beagle and minimac4 (`genimpute benchmark`), shellcheck (the shell scripts),
GNU time (/usr/bin/time, the benchmarks' shell helpers).

Run by hand, a test whose program is missing is skipped with the reason;
under CI (GENIMPUTE_CI=1, set by .ci/run, which installs them all) it fails,
so a green CI run has run every test."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    packages = " ".join(Path(tool).name for tool in missing)  # /usr/bin/time: the package `time`
    reason = f"{', '.join(missing)} not on PATH (Debian: apt-get install {packages})"
    if os.environ.get("GENIMPUTE_CI"):
        pytest.fail(f"{reason}; under CI every tool is installed")
    pytest.skip(reason)


def run_tool(args: list, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run of an external program, after require()."""
    require(args[0])
    return subprocess.run(args, **kwargs)
