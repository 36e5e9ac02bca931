"""Backbones, chosen by name. Cell tokens are REF/ALT/MASKED (see
genimpute.config); `typed` is a window's (M,) typed-column mask. A backbone's
`shares_context` says which of two interfaces it has; `reconstructs_context`
whether training adds a context-reconstruction term; `default_window` the
window geometry (U, T) and context size k it is trained with unless told;
`queries_per_cpu_pass` how many queries one pass holds on a CPU.

Nearest-context backbones (match, msa, npssm; shares_context False): each
query has its own context, its k nearest panel haplotypes.
`forward(tokens, typed, genetic)` maps (B, R, M) tokens (row 0 the query,
rows 1.. its context) to alt-allele logits (B, R, M), genetic (M,) being the
columns' cM (read by match alone); `query_logits(tokens, typed, genetic)`
gives the query row's at the untyped columns (B, U), computing only what
those cells need.

Shared-context backbones (spin; shares_context True): every query of a
window shares one context, the window's panel haplotypes, encoded once.
`encode(context (R, M), typed)` gives a memory; `query_log_odds(memory,
rows (B, M), typed, neighbours)` the alt-allele log-odds (B, U) of the rows'
untyped columns; `forward(context, rows, typed, neighbours)` the training
pass, in the backbone's own output classes (SPIN: K-mer classes). When the
backbone's `neighbours` is n > 0, each row also reads its n nearest context
rows, given as (B, n) indices into the context; otherwise pass None.
"""

from __future__ import annotations

from genimpute.config import ModelConfig, WindowConfig
from genimpute.errors import GenimputeError
from genimpute.models.match import HaplotypeMatcher
from genimpute.models.msa import MSATransformer
from genimpute.models.npssm import NPSSM
from genimpute.models.spin import SPIN

REGISTRY = {
    "match": HaplotypeMatcher,
    "msa": MSATransformer,
    "npssm": NPSSM,
    "spin": SPIN,
}


def default_window(name: str) -> WindowConfig:
    """The window geometry and context size a backbone was measured with
    (BENCHMARKS.md); WindowConfig's defaults for a name that is not a
    backbone (build_model reports it)."""
    cls = REGISTRY.get(name)
    return cls.default_window if cls is not None else WindowConfig()


def build_model(config: ModelConfig):
    try:
        cls = REGISTRY[config.name]
    except KeyError:
        raise GenimputeError(
            f"unknown model {config.name!r}; expected one of: {', '.join(sorted(REGISTRY))}"
        ) from None
    return cls(config)
