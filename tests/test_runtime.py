"""Process-level settings the CLI makes before any work."""

import json
import subprocess
import sys


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
