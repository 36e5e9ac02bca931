"""Run genimpute's command line as an installation without PyTorch runs it:
every import of torch fails. `python tests/without_torch.py impute ...`."""

import runpy
import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"No module named {name!r}")
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, _NoTorch())
    sys.argv = ["genimpute", *sys.argv[1:]]
    runpy.run_module("genimpute", run_name="__main__")
