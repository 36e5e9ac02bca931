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
