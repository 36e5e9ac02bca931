"""Process-level settings: device choice, allocator and thread tuning."""

from __future__ import annotations

import atexit
import ctypes
import gc
import logging
import os
import sys
from typing import TYPE_CHECKING

from threadpoolctl import threadpool_limits

from genimpute.errors import GenimputeError

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

_thread_limit: int | None = None  # --threads, once given


def usable_cores() -> int:
    """Threads a command runs on: --threads if it was given, else the cores
    this process may run on (a scheduler's CPU set, where the OS tells it)."""
    if _thread_limit is not None:
        return _thread_limit
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def limit_threads(n: int) -> None:
    """Run on n threads (--threads): the copying engine's and the writer's
    compiled loops, torch's operations, BGZF compression and the phaser.
    A batch scheduler that counts a job's cores may not confine it to them,
    and every pool would otherwise take all the machine's. numba's pool is
    sized when it starts (to the CPU set), so n beyond that runs as many as
    it holds; outputs do not depend on n."""
    global _thread_limit
    import numba

    if n < 1:
        raise GenimputeError(f"--threads: expected at least 1; found {n}")
    _thread_limit = n
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    else:  # read by torch when it is imported
        os.environ["OMP_NUM_THREADS"] = str(n)


def pick_device(name: str = "auto") -> torch.device:
    """'auto' takes CUDA when present, else the CPU. Torch is imported here,
    not at the top: a command that runs no model does without it."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise GenimputeError(f"device {name!r} requested; expected CUDA to be available; found none")
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise GenimputeError(f"unknown device {name!r}; expected auto, cpu or cuda[:N]") from exc


def tune_allocator() -> None:
    """Keep freed memory in the heap instead of returning it to the OS after
    every tensor: measured ~3x faster forward passes on CPU here (see DESIGN.md).
    Same effect as MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1e11
    MALLOC_TOP_PAD_=1 GiB; a no-op where glibc's mallopt is absent."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_top_pad, m_mmap_max = -1, -2, -4
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, 2**31 - 1)
    libc.mallopt(m_top_pad, 1 << 30)


def release_freed_memory() -> None:
    """Give the heap's freed pages back to the OS (glibc's malloc_trim; a
    no-op elsewhere). tune_allocator keeps them for torch's passes, so a
    large structure freed stays resident: dropping one segment's index and
    tables before the next is built took the peak of the 16,000-sample, 10
    Mb job from 1.65 to 1.44 GB, in the same time (BENCHMARKS.md)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def single_threaded_blas() -> None:
    """Run numpy's BLAS (the nearest-haplotype matmul) on one thread. Its
    idle worker threads busy-wait for the next call and take the cores from
    torch's threads, and the reverse: on this 2-core machine a pass of the
    match backbone took 56 ms with both pools against 13-16 ms with this
    (BENCHMARKS.md). Torch's own threads are not limited."""
    threadpool_limits(1, user_api="blas")


def skip_final_collection() -> None:
    """At exit, freeze every live object instead of letting the interpreter's
    final garbage collection walk them: with torch imported, that walk took
    about 0.4 s of every command here (BENCHMARKS.md). Files are closed by
    then; frozen objects are still freed by reference counting."""
    atexit.register(gc.freeze)
