"""Backbones behind one interface, chosen by name.

Every backbone maps cell tokens (B, R, M) (row 0 the query, rows 1.. its
context; see genimpute.config for the token values) and a (M,) typed-column
mask to alt-allele logits (B, R, M) with `forward`, and to the query row's
logits at the untyped columns (B, U) with `query_logits`, which imputation
calls: a backbone computes only what those cells need there.
"""

from __future__ import annotations

from genimpute.config import ModelConfig
from genimpute.errors import GenimputeError
from genimpute.models.msa import MSATransformer

REGISTRY = {
    "msa": MSATransformer,
}


def build_model(config: ModelConfig):
    try:
        cls = REGISTRY[config.name]
    except KeyError:
        raise GenimputeError(
            f"unknown model {config.name!r}; expected one of: {', '.join(sorted(REGISTRY))}"
        ) from None
    return cls(config)
