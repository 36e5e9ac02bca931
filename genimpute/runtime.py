"""Process-level settings: device choice, allocator and thread tuning, where
numba caches its compiled code."""

from __future__ import annotations

import atexit
import ctypes
import gc
import hashlib
import logging
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from threadpoolctl import threadpool_limits

from genimpute.errors import GenimputeError

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

_thread_limit: int | None = None  # --threads, once given
PACKAGE = Path(os.path.abspath(os.path.dirname(__file__)))  # as numba names the sources: not resolved


def locate_numba_cache() -> Path | None:
    """Give numba a directory it can write its compiled code to where the
    package's own cannot be written (a read-only container: Apptainer's
    images, `docker run --read-only`, Kubernetes' readOnlyRootFilesystem),
    with the code compiled there at install time (the Dockerfile's warm-up)
    copied in, so that such a container starts warm. numba itself would
    fall back to the user's cache directory, compiling everything again
    (a minute), and with no writable home refuse to run ("cannot cache
    function ...: no locator available"). Takes the user's cache directory,
    else the system's temporary one; leaves NUMBA_CACHE_DIR as it is when
    set. Run before any module that compiles with numba is imported: the
    directory numba took (None: its own beside the sources)."""
    if os.environ.get("NUMBA_CACHE_DIR") or _writable(PACKAGE / "copying" / "__pycache__"):
        return None
    candidates = [Path(tempfile.gettempdir()) / f"genimpute-numba-{os.getuid()}"]
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    if not user_cache.startswith("~"):  # no home known (an arbitrary container uid): the temporary one alone
        candidates.insert(0, Path(user_cache) / "genimpute" / "numba")
    for directory in candidates:
        if _writable(directory):
            _copy_compiled(PACKAGE, directory)
            os.environ["NUMBA_CACHE_DIR"] = str(directory)
            if "numba" in sys.modules:  # imported before genimpute: it read the environment already
                sys.modules["numba"].config.CACHE_DIR = str(directory)
            return directory
    raise GenimputeError(f"expected a writable directory for numba's compiled code; found "
                         f"{', '.join(map(str, [PACKAGE, *candidates]))} read-only: set NUMBA_CACHE_DIR to one")


def announce_first_compile(function, what: str, seconds: int) -> None:
    """Log that numba compiles `what` on this run (about `seconds` s on 2
    cores, once a machine) where it has no code cached for `function`, its
    entry point: a first run otherwise looks stalled, for far longer than
    the job takes warm. Silent where numba's cache cannot be read so."""
    try:
        cached = os.path.exists(function._cache._cache_file._index_path)
    except AttributeError:  # not a cached dispatcher, or numba lays its cache out otherwise
        return
    if not cached:
        log.info("numba compiles %s on this first run on this machine: about %d s more, once", what, seconds)


def _writable(directory: Path) -> bool:
    """Whether directory exists or can be made, and a file written in it (as numba tests its cache's)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
    except OSError:
        return False
    return True


def _copy_compiled(package: Path, cache: Path) -> None:
    """Copy the numba cache files beside package's sources to where numba
    looks for them under the cache directory `cache`, each that is not
    there yet: a source directory's in cache/NAME_SHA1, NAME its last part
    and SHA1 that of its path (numba's _CacheLocator.get_suitable_cache_subpath,
    not imported: `import genimpute` loads no numba). Each is written under
    another name and renamed: jobs starting together read whole files."""
    for path in package.rglob("__pycache__/*.nb[ic]"):
        sources = str(path.parent.parent)
        target = cache / f"{path.parent.parent.name}_{hashlib.sha1(sources.encode()).hexdigest()}" / path.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f"{target.name}.{os.getpid()}.part")
            shutil.copy2(path, partial)
            os.replace(partial, target)


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


def require_torch(what: str) -> None:
    """The learned backbones need PyTorch, an extra: the copying engine,
    the phaser and evaluate do without it, so a light install lacks it."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise GenimputeError(f"{what} needs PyTorch, which this installation lacks: install the learned "
                             "backbones' extra, pip install 'genimpute[learned]'") from exc


DEVICE_NAME = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


def check_device_name(name: str, engine: str) -> None:
    """Refuse a device name that no engine reads, and a GPU for the copying
    engine, which runs on the CPU alone: ignoring either would run the job
    somewhere other than the user asked."""
    if not DEVICE_NAME.fullmatch(name):
        raise GenimputeError(f"--device: expected auto, cpu or cuda[:N]; found {name!r}")
    if engine == "copying" and name.startswith("cuda"):
        raise GenimputeError(f"--device {name}: the copying engine runs on the CPU; a GPU serves the learned "
                             "backbones (--engine model)")


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
    every tensor: forward passes on CPU run several times faster (see docs/results.md).
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
    large structure freed stays resident: giving back one segment's index
    and tables before the next is built lowers a large job's peak memory,
    at no cost in time (see docs/results.md)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def single_threaded_blas() -> None:
    """Run numpy's BLAS (the nearest-haplotype matmul) on one thread. Its
    idle worker threads busy-wait for the next call and take the cores from
    torch's threads, and the reverse: on a machine of few cores a pass of
    the match backbone took several times as long with both pools (see
    docs/results.md). Torch's own threads are not limited."""
    threadpool_limits(1, user_api="blas")


def skip_final_collection() -> None:
    """At exit, freeze every live object instead of letting the interpreter's
    final garbage collection walk them: with torch imported, that walk took
    a noticeable part of every short command (see docs/results.md). Files
    are closed by then; frozen objects are still freed by reference counting."""
    atexit.register(gc.freeze)
