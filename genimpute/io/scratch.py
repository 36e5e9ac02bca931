"""Temporary files beside the output: scratch directories, what a killed
run left, and the rename that publishes a finished output.

Working files go beside the output, not in the system's temporary
directory: a cluster's jobs share /tmp with nobody looking after it, and a
run killed with SIGKILL (out of time, out of memory) cannot remove its own.
Each name carries the writing process's ID, so the next run in the same
directory removes those whose process is gone.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
from pathlib import Path

from genimpute.errors import InputError

PHASE_SCRATCH = ".genimpute-phase"  # the files an external phaser reads and writes


def process_gone(pid: int) -> bool:
    """No process with this ID runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextlib.contextmanager
def scratch_directory(directory: str | Path | None, prefix: str):
    """A new directory `prefix`.PID.XXXX in `directory` (None: the system's
    temporary one), removed with everything in it on the way out."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}.{os.getpid()}.", dir=directory))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_stale_scratch(directory: str | Path, prefix: str) -> int:
    """Remove the scratch directories `prefix`.PID.* in `directory` whose
    process is gone; how many were removed."""
    removed = 0
    for leftover in Path(directory).glob(f"{prefix}.*.*"):
        pid = leftover.name[len(prefix) + 1:].split(".", 1)[0]
        if leftover.is_dir() and pid.isdigit() and process_gone(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)
            removed += 1
    return removed


def remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files a killed writer of `path` left (SIGKILL
    cannot be caught): .tmpPID.NAME and its tabix index, PID no longer
    running (the writers name their temporaries so: VcfWriter, OutputFiles)."""
    for leftover in path.parent.glob(f".tmp*.{glob.escape(path.name)}*"):
        pid = leftover.name[4:].split(".", 1)[0]
        if not pid.isdigit() or leftover.name not in (f".tmp{pid}.{path.name}", f".tmp{pid}.{path.name}.tbi"):
            continue
        if process_gone(int(pid)):
            leftover.unlink(missing_ok=True)


def publish(tmp: str | Path, path: str | Path, force: bool) -> None:
    """Rename the finished `tmp` to `path`. Without `force` an output that
    appeared at `path` while this run wrote (another run given the same
    name) is never replaced: a hard link fails where the name is taken,
    where a rename would silently replace it."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise InputError(f"output {path}: written by another process during this run (two runs given the same "
                         "output?); this run's result is discarded; use --force to replace it") from None
    except OSError:  # a filesystem without hard links: the check and the rename cannot be one step
        if os.path.lexists(path):
            raise InputError(f"output {path}: written by another process during this run; this run's result "
                             "is discarded; use --force to replace it") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


@contextlib.contextmanager
def naming(path: str | Path):
    """Give an OSError raised without a file name (a write's "No space left
    on device") the name of `path`, so the user is told where."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def write_whole(path: str | Path, write) -> None:
    """Call write(tmp) for a temporary file beside `path`, then rename it
    to `path`: `path` is replaced whole or left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path):
            write(tmp)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
