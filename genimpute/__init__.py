"""genimpute: genotype imputation from a phased reference panel.

The public API (genimpute.api): `impute`, `train` and `evaluate`, the three
commands of the same names as Python functions.
"""

from genimpute.runtime import locate_numba_cache

locate_numba_cache()  # before any module that numba compiles is imported

from genimpute.api import evaluate, impute, train  # noqa: E402

__version__ = "0.2.0"
__all__ = ["__version__", "evaluate", "impute", "train"]
