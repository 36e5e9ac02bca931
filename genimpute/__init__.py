"""genimpute: genotype imputation with neural non-parametric models."""

__version__ = "0.1.0"
