"""The copying engine: a Li and Stephens hidden Markov model run once per
target haplotype along all the typed sites of a segment (2,000 by default,
4,000 from 48,000 haplotypes: CopyingSettings.core_sites), over states
chosen for that haplotype by positional BWTs of the panel (Durbin 2014),
as IMPUTE5 finds its copying states, and kept in composite states, as
Beagle 5 keeps its reference haplotypes.

Why not per window: a window's context is chosen on its few hundred typed
sites, and in a panel of thousands of samples many haplotypes match a
target there equally well, so which of them carry a rare allele is a coin
toss. The haplotypes that share the target's longest segments tell the
carriers apart, and those are the ones the PBWT finds: at every typed
site, the `neighbours` haplotypes either side of the target in the PBWT
order share the longest runs of alleles with it ending there (left-to-right
index) or starting there (right-to-left index), read out at every
second typed site (CopyingSettings.sight_every: the neighbours of
neighbouring sites are mostly the same, and reading them out was most of
the walks' time). Each of `max_states`
composite states copies one of them at a time: a haplotype found where it
holds no state takes the state whose haplotype was found longest ago, from
halfway between the two sightings. So every stretch of the segment has the
haplotypes matching the target there; one set of the `max_states` found
most often over the whole segment left some stretches with few of those
when more were found (held-out figures in docs/results.md). A large panel
gets more states (CopyingSettings.passes): the more haplotypes match a
target equally well, the more states it takes to tell them apart. From
4,000 haplotypes, twice as many: on held-out samples they lowered the
error in the rarer bins of larger panels, and cost the rarest bins of
small ones, so small panels keep fewer. From 48,000 haplotypes, twice the
neighbours and twice the states again: less error in most MAF bins of
the largest panels, for twice the engine's time, which smaller panels do
not repay. With `wide_states` a second pass, over more states from more
neighbours, follows (doubled from 4,000 haplotypes, as the first), and
P(alt) is the mean of the two passes': not the default, as it cost
several times the time for gains on held-out samples that the scale
series' targets did not show (see docs/results.md). One
forward-backward over the segment weighs each state by the whole path,
where per-window passes recomputed overlapping stretches for every window.

Switches between states happen with probability 1 - exp(-d / L) over d
cM, L = H / (0.04 ne) + s / site_switch, H the panel's haplotypes and s the
mean cM between the contig's typed sites: Li and Stephens' rate falls as
the panel grows, which one fixed rate per cM did not, and the second term
bounds it at site_switch switches per typed site on average, where a small
panel's rate would grow as 1 / H and sparse sites tell its haplotypes apart
less (held-out figures in docs/results.md). Untyped records take the states' alleles weighted
by the posteriors at the typed sites either side, interpolated in cM; typed
sites without a call, the posterior at the site.

Numba-compiled: the walks and the sweeps are loops over sites that numpy
cannot vectorise across states without many temporaries, and numba (a pip
wheel, no compiler at install) compiles them to loops over plain arrays;
groups of haplotypes run in parallel (their states chosen together, then
each its own forward-backward with its own arrays), and no haplotype's
output depends on another's, so it does not depend on the thread count or
the grouping.
"""

from genimpute.copying.model import ContigModel, Segment

__all__ = ["ContigModel", "Segment"]
