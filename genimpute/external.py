"""External tools (Beagle, shapeit4, Minimac4) run as children that die
with genimpute.

A child left running after genimpute is killed keeps its cores and memory
on a cluster node that the scheduler believes free. Each child therefore
runs in a process group of its own, killed whole when genimpute unwinds
(an error, Ctrl-C, SIGTERM), and asks the kernel to kill it when its parent
dies (Linux's parent-death signal), which covers SIGKILL, where no unwinding
happens.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def _death_signal_setter():
    """A function for the child, between fork and exec, that has the kernel
    send it SIGKILL when genimpute dies; None where the system has no such
    signal. libc is looked up here, before the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_death_signal():
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was asked for
            os._exit(1)

    return set_death_signal


def run_tied(cmd: list, stdout=None, stderr=subprocess.STDOUT, cwd=None) -> int:
    """Run `cmd` to its end and return its exit status; the child and its
    own children are killed if genimpute stops first, however it stops."""
    child = subprocess.Popen([str(part) for part in cmd], stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                             cwd=cwd, start_new_session=True, preexec_fn=_death_signal_setter())
    try:
        return child.wait()
    except BaseException:
        kill_group(child)
        raise


def kill_group(child: subprocess.Popen) -> None:
    """SIGKILL the child's process group (the child and what it started), and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
