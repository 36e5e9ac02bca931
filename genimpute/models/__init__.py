"""Backbones, chosen by name: each a torch module and, beside it in its
own file, its config (a genimpute.config.BackboneConfig holding the
settings that backbone reads, checked when built); a fifth backbone is its
file and a REGISTRY entry.

Cell tokens are REF/ALT/MASKED (see genimpute.config); `typed` is a
window's (M,) typed-column mask. A backbone's `shares_context` says which of
two interfaces it has; `reconstructs_context` whether training adds a
context-reconstruction term; `default_window` the window geometry (U, T) and
context size k it is trained with unless told; `queries_per_cpu_pass` how
many queries one pass holds on a CPU.

Nearest-context backbones (match, msa, npssm; shares_context False): each
query has its own context, its k nearest panel haplotypes.
`forward(tokens, typed, genetic)` maps (B, R, M) tokens (row 0 the query,
rows 1.. its context) to alt-allele logits (B, R, M), genetic (M,) being the
columns' cM (read by match, and by msa and npssm with evidence);
`query_logits(tokens, typed, genetic)` gives the query row's at the untyped
columns (B, U), computing only what those cells need.

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

from dataclasses import fields
from typing import NamedTuple

from genimpute.config import BackboneConfig, WindowConfig
from genimpute.errors import GenimputeError
from genimpute.models.match import HaplotypeMatcher, MatchConfig
from genimpute.models.msa import MSAConfig, MSATransformer
from genimpute.models.npssm import NPSSM, NPSSMConfig
from genimpute.models.spin import SPIN, SPINConfig


class Backbone(NamedTuple):
    model: type  # the torch module, built from a `config`
    config: type  # its settings, a genimpute.config.BackboneConfig defined beside it


REGISTRY = {
    "match": Backbone(HaplotypeMatcher, MatchConfig),
    "msa": Backbone(MSATransformer, MSAConfig),
    "npssm": Backbone(NPSSM, NPSSMConfig),
    "spin": Backbone(SPIN, SPINConfig),
}


def backbone(name: str) -> Backbone:
    try:
        return REGISTRY[name]
    except KeyError:
        raise GenimputeError(f"unknown model {name!r}; expected one of: {', '.join(sorted(REGISTRY))}") from None


def settings_of(name: str) -> list[str]:
    """The settings the backbone `name` reads, in its config's order."""
    return [f.name for f in fields(backbone(name).config)]


def model_config(name: str, **settings) -> BackboneConfig:
    """The backbone `name`'s config with `settings` (the rest its
    defaults): one error for an unknown backbone, a setting it does not
    read (ValueError) or a value its config refuses (ValueError)."""
    reads = settings_of(name)
    unread = sorted(set(settings) - set(reads))
    if unread:
        raise ValueError(f"{name} settings: expected among {', '.join(reads)}; found {', '.join(unread)}")
    return backbone(name).config(**settings)


def default_window(name: str) -> WindowConfig:
    """The window geometry and context size a backbone was measured with
    (see docs/results.md); WindowConfig's defaults for a name that is not a
    backbone (model_config and build_model report it)."""
    entry = REGISTRY.get(name)
    return entry.model.default_window if entry is not None else WindowConfig()


def build_model(config: BackboneConfig):
    return backbone(config.name).model(config)
