"""genimpute: genotype imputation from a phased reference panel.

The public API (genimpute.api): `impute`, `train` and `evaluate`, the three
commands of the same names as Python functions.
"""

from genimpute.api import evaluate, impute, train

__version__ = "0.1.0"
__all__ = ["__version__", "evaluate", "impute", "train"]
