"""A learned refinement of the copying engine's P(alt), read from the
engine's own context: for each untyped record and query haplotype, the
composite states that carry the most posterior weight at the typed sites
either side of it, their alleles there, and how well each state's
haplotypes match the query around it (context.py), as features
(features.py). Small torch models read those and output a correction to
the engine's log-odds that starts at none: a recalibration and an MLP on
summaries (models.py), a per-state reweighting (reweight.py), attention
across the states (attention.py); train.py trains them.

Research code: nothing in `genimpute impute` uses it yet. The context
needs only numpy and numba; the models need torch, imported only by them.
"""

from genimpute.refine.context import SegmentContext, segment_context

__all__ = ["SegmentContext", "segment_context"]
