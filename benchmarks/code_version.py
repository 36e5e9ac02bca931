"""The genimpute code this environment imports, as a short hash of its
package's files (the code and the pretrained model; not numba's or
Python's caches), and of any other files or directories named (a model
directory a benchmark imputes with). A benchmark keeps a genimpute step's
output from an earlier run only if the same code made it (lib.sh's
`kept`, heldout_large_panel.py): an output kept across a change of the
engine was otherwise read as the new code's.

    python benchmarks/code_version.py [PATH ...]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import genimpute


def code_version(package: Path = Path(genimpute.__file__).parent, others: tuple = ()) -> str:
    """16 hex digits of the sha256 of the files of the package, then of
    each of `others` (a file or a directory), names and contents, each in
    name order."""
    digest = hashlib.sha256()
    for root in (package, *map(Path, others)):
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in sorted(p for p in files if "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(root.parent if root.is_file() else root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


if __name__ == "__main__":
    missing = [p for p in sys.argv[1:] if not Path(p).exists()]
    if missing:
        sys.exit(f"code_version.py: expected files or directories; found none at {', '.join(missing)}")
    print(code_version(others=tuple(sys.argv[1:])))
