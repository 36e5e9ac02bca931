"""The genimpute code this environment imports, as a short hash of its
package's files (the code and the pretrained model; not numba's or
Python's caches). A benchmark keeps a genimpute step's output from an
earlier run only if the same code made it (lib.sh's `kept`,
heldout_large_panel.py): an output kept across a change of the engine was
otherwise read as the new code's.

    python benchmarks/code_version.py
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import genimpute


def code_version(package: Path = Path(genimpute.__file__).parent) -> str:
    """16 hex digits of the sha256 of the package's files, names and contents, in name order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(package)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


if __name__ == "__main__":
    print(code_version())
