"""Process-level settings the CLI makes before any work."""

import json
import os
import subprocess
import sys

import pytest

from genimpute import runtime
from genimpute.errors import GenimputeError


def test_numpys_blas_gets_one_thread_and_torch_keeps_its_own():
    # in a fresh process: the limit lasts for the whole process
    script = (
        "import json, numpy, torch, threadpoolctl\n"
        "from genimpute.runtime import single_threaded_blas\n"
        "torch.set_num_threads(2)\n"
        "single_threaded_blas()\n"
        "blas = [p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas']\n"
        "print(json.dumps({'blas': blas, 'torch': torch.get_num_threads()}))\n"
    )
    threads = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                        check=True).stdout)
    assert threads["blas"] and set(threads["blas"]) == {1}
    assert threads["torch"] == 2


def test_objects_alive_at_exit_are_frozen_before_the_final_collection():
    # atexit runs handlers last-in first-out: this probe, registered first, runs after the freeze
    script = (
        "import atexit, gc\n"
        "from genimpute.runtime import skip_final_collection\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, flush=True))\n"
        "skip_final_collection()\n"
        "print('unfrozen before exit', gc.get_freeze_count() == 0, flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["unfrozen before exit True", "frozen True"]


def _package_with_a_cached_function(tmp_path):
    """(a package `readonly_pkg` under tmp_path whose module `mod` has a
    numba function `double` cached beside its sources, the environment that
    imports it)."""
    package = tmp_path / "readonly_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("import numba\n\n\n@numba.njit(cache=True)\ndef double(x):\n    return 2 * x\n")
    env = {name: value for name, value in os.environ.items() if name != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return package, env


def test_a_first_compile_is_announced_once(tmp_path):
    _, env = _package_with_a_cached_function(tmp_path)
    script = ("import logging; logging.basicConfig(level=logging.INFO)\n"
              "import readonly_pkg.mod as m\n"
              "from genimpute.runtime import announce_first_compile\n"
              "announce_first_compile(m.double, 'double', 1)\n"
              "m.double(3)\n")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True).stderr
            for _ in range(2)]
    assert "numba compiles double on this first run on this machine: about 1 s more, once" in runs[0]
    assert "numba compiles" not in runs[1]


def test_a_read_only_package_caches_numbas_code_elsewhere_and_starts_warm(tmp_path):
    """Where the package's directory cannot be written (faked here: the
    tests may run as root), numba is pointed at the user's cache directory
    with the code compiled beside the sources copied in, and loads it from
    there: no compile in the read-only run."""
    package, env = _package_with_a_cached_function(tmp_path)
    subprocess.run([sys.executable, "-c", "import readonly_pkg.mod as m; m.double(3)"], env=env, check=True)
    assert list((package / "__pycache__").glob("mod.double-*.nbi"))  # compiled at "install time"
    script = (
        "import json, os\n"
        "from pathlib import Path\n"
        "import genimpute.runtime as r\n"
        f"r.PACKAGE = Path({str(package)!r})\n"
        "writable = r._writable\n"
        "r._writable = lambda d: d != r.PACKAGE and r.PACKAGE not in d.parents and writable(d)\n"
        "used = r.locate_numba_cache()\n"
        "import readonly_pkg.mod as m\n"
        "m.double(3)\n"
        "print(json.dumps([str(used), os.environ['NUMBA_CACHE_DIR'], sum(m.double.stats.cache_hits.values()),\n"
        "                  sum(m.double.stats.cache_misses.values())]))\n"
    )
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    used, cache_dir, hits, misses = json.loads(subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                                              capture_output=True, text=True).stdout)
    assert used == cache_dir == str(tmp_path / "cache" / "genimpute" / "numba")
    assert (hits, misses) == (1, 0)


def test_numba_cache_dir_given_is_kept_and_no_writable_directory_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert runtime.locate_numba_cache() is None
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(runtime, "_writable", lambda directory: False)
    with pytest.raises(GenimputeError, match="expected a writable directory for numba's compiled code; found .* "
                                             "read-only: set NUMBA_CACHE_DIR to one"):
        runtime.locate_numba_cache()
