"""Frozen settings. Every model directory stores them, so a checkpoint rebuilds
its model and windows with no flags."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class WindowConfig:
    # the defaults are the default backbone's; the CLI takes each backbone's own `default_window`
    untyped: int = 300  # U: consecutive untyped variants predicted by one window
    typed: int = 300  # T: typed variants nearest to them, given as evidence
    context: int = 128  # k: panel haplotypes nearest to the query by L1 on typed sites
    # the nearest-haplotype distance counts a mismatch at near_weight times
    # the rest at the typed sites of the predicted block's span and the
    # near_sites on either side of it: the haplotypes to copy are those that
    # match where the predicted variants are (see docs/results.md); 1 is plain Hamming
    near_sites: int = 20
    near_weight: int = 6

    def __post_init__(self):
        for name in ("untyped", "typed", "context", "near_weight"):
            if getattr(self, name) < 1:
                raise ValueError(f"window {name} must be >= 1; found {getattr(self, name)}")
        if self.near_sites < 0:
            raise ValueError(f"window near_sites must be >= 0; found {self.near_sites}")


@dataclass(frozen=True)
class BackboneConfig:
    """The settings every backbone reads. Each backbone's own config
    subclasses this beside its model (genimpute.models), adds what that
    backbone reads and nothing else, and checks it when built; RunConfig
    checks its window against it, so a bad combination is one error before
    any panel is read."""

    name: ClassVar[str]  # the backbone's name in genimpute.models.REGISTRY, stored with its settings
    dim: int = 32
    layers: int = 2

    def __post_init__(self):
        self.require_at_least(dim=1, layers=1)

    def require_at_least(self, **lowest: int) -> None:
        for setting, low in lowest.items():
            if getattr(self, setting) < low:
                raise ValueError(f"{self.name} {setting}: expected at least {low}; found {getattr(self, setting)}")

    def check_window(self, window: WindowConfig) -> None:
        """Raise ValueError for a window geometry the backbone cannot read;
        a backbone that reads any says nothing."""

    def to_dict(self) -> dict:
        return {"name": self.name, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 4000
    max_minutes: float = 30.0  # wall-clock budget; training stops at whichever comes first
    batch_size: int = 8  # queries per step (all from one window)
    lr: float = 1e-3
    warmup_steps: int = 100
    seed: int = 1
    checkpoint_every: int = 100
    validate_every: int = 250
    val_fraction: float = 0.05  # panel samples held out for validation r2
    val_windows: int = 24
    # loss = (1 - lam) * context reconstruction + lam * query cross-entropy,
    # lam annealed linearly from lam_start to 1 over anneal_steps.
    lam_start: float = 0.5
    anneal_steps: int = 2000
    mask_rate: float = 0.10  # share of context cells hidden for reconstruction
    mask_span: int = 8  # hidden cells come in runs of this many variants
    query_missing_rate: float = 0.02  # share of the query's typed cells hidden, as missing calls are
    # the query's untyped cells weighted by MAF^-maf_weight (MAF among training
    # haplotypes), scaled to mean 1 per window; 0 weights them equally
    maf_weight: float = 0.0
    # each step keeps a random share in [min_array_density, 1] of the window's
    # array sites typed and imputes the rest, as with sparser arrays; 1 keeps all
    min_array_density: float = 1.0

    def __post_init__(self):
        if self.maf_weight < 0:
            raise ValueError(f"maf_weight must be >= 0; found {self.maf_weight}")
        if not 0 < self.min_array_density <= 1:
            raise ValueError(f"min_array_density must be in (0, 1]; found {self.min_array_density}")


@dataclass(frozen=True)
class RunConfig:
    """What a model directory records about how its model was built."""

    window: WindowConfig
    model: BackboneConfig
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        self.model.check_window(self.window)

    def to_dict(self) -> dict:
        """The form config.json stores (genimpute.modeldir reads it back)."""
        return {"window": dataclasses.asdict(self.window), "model": self.model.to_dict(),
                "train": dataclasses.asdict(self.train)}


# Cell tokens shared by the windowing code and every backbone.
REF, ALT, MASKED = 0, 1, 2
N_TOKENS = 3

# external phasers `genimpute impute` can phase an unphased target with, in order of preference
PHASERS = ("beagle", "shapeit4")
# genimpute's own phaser (genimpute.copying.phaser): what --phaser auto takes where neither is on PATH
BUILT_IN_PHASER = "genimpute"

# tools `genimpute benchmark` knows how to run, in report order
BENCHMARK_TOOLS = ("genimpute", "beagle", "minimac4")

# share of the typed sites `impute --validate` hides to estimate accuracy
DEFAULT_VALIDATION_FRACTION = 0.05


def switch_cm(n_haplotypes: int, site_cm: float, ne: float, site_switch: float) -> float:
    """cM over which a copying model switches state once on average, in a
    panel of n_haplotypes with typed sites site_cm cM apart on average: Li
    and Stephens' H / (0.04 ne), and 1 / site_switch sites' spacing more."""
    return n_haplotypes / (0.04 * ne) + site_cm / site_switch


@dataclass(frozen=True)
class PhasingSettings:
    """genimpute's own phaser (genimpute.copying.phaser)."""

    # rounds over every target, each choosing its states again from the phase the last one left. The first
    # sampled_rounds draw each change in proportion to its likelihood, the others take the most likely; the last
    # cohort_rounds copy from the other targets too, as the round before left them. On held-out samples each
    # part earned its place: taking the most likely from the first round, leaving out the cohort, or a larger
    # error each left more switch errors (see docs/results.md)
    rounds: int = 8
    sampled_rounds: int = 5
    cohort_rounds: int = 2
    error: float = 1e-3  # probability of showing an allele other than the copied one (the copying engine's)
    seed: int = 1  # of the sampled rounds' draws: the same targets and panel, the same phase
    # a target's two haplotypes copy from `states` composite states, chosen from the PBWT `neighbours` of each
    # on either side, both directions, at every sight_every-th typed site, at any panel size; the switch rate is
    # the copying engine's form (switch_cm) with its own ne. The engine's imputation settings left more switch
    # errors than Beagle's on held-out samples; these (more states in small panels, a larger ne) close most of
    # that gap, and the samples impute about as well as Beagle-phased ones. Fewer neighbours did no better
    # overall: they left more imputation error in large panels (see docs/results.md)
    neighbours: int = 16
    states: int = 800
    sight_every: int = 2
    ne: float = 5e5
    site_switch: float = 0.1

    def switch_cm(self, n_haplotypes: int, site_cm: float) -> float:
        """cM over which the phaser's copying switches state once on average (config.switch_cm)."""
        return switch_cm(n_haplotypes, site_cm, self.ne, self.site_switch)

    def __post_init__(self):
        for name in ("neighbours", "states", "sight_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"phasing {name}: expected at least 1; found {getattr(self, name)}")
        if not self.ne > 0 or not 0 < self.site_switch <= 1:
            raise ValueError(f"phasing switch rate: expected ne > 0 and 0 < site_switch <= 1; found {self.ne} and "
                             f"{self.site_switch}")
        if not 0 <= self.sampled_rounds <= self.rounds or not 0 <= self.cohort_rounds <= self.rounds:
            raise ValueError(f"phasing rounds: expected 0 <= sampled_rounds, cohort_rounds <= rounds; found "
                             f"{self.sampled_rounds}, {self.cohort_rounds} and {self.rounds}")
        if not 0 < self.error < 0.5:
            raise ValueError(f"phasing error: expected a probability in (0, 0.5); found {self.error}")


@dataclass(frozen=True)
class CopyingSettings:
    """The region-wide copying engine's settings (genimpute.copying)."""

    neighbours: int = 16  # PBWT neighbours taken on each side of the target at every typed site, each direction
    max_states: int = 400  # composite states per haplotype and segment, each copying one haplotype at a time, ...
    # ... and twice as many in a panel of large_states_from haplotypes or more: the more haplotypes match a target
    # equally well, the more states it takes to tell them apart. On held-out samples the doubled states lowered
    # the error in large panels, at a cost in time that keeps the engine level with Beagle, and slightly raised
    # it in small ones (see docs/results.md)
    large_states_from: int = 4000
    # from more_neighbours_from haplotypes, twice the neighbours and twice the states again (32 and 1,600 by
    # default): in the largest panels they lower the error in most bins, where genimpute was otherwise only level
    # with Beagle; below
    # this threshold they gained too little for the doubled engine time, and either change alone gained little
    # (see docs/results.md). Segments twice as long from there too (segment_sites)
    more_neighbours_from: int = 48000
    # states of a second, wider pass whose P(alt) is averaged with the first's (0: none), doubled from
    # large_states_from as max_states (weighed before that doubling: 800 from 32 neighbours beside 400 from 16)
    wide_states: int = 0
    wide_neighbours: int = 32
    # neighbours are sighted at every sight_every-th typed site only: the walks still follow the target through
    # every site, but reading the neighbours out of the PBWT order, and placing them in states, was most of their
    # cost, and neighbouring sites' neighbours are mostly the same haplotypes. 2 saves a good part of that time
    # at no real cost in error at any panel size; sighting more sparsely than that began to cost error (see
    # docs/results.md)
    sight_every: int = 2
    ne: float = 3e5  # effective population size in Li and Stephens' switch rate, 0.04 ne cM / panel haplotypes
    # ... a rate bounded so that on average a switch between neighbouring typed sites is at most this likely:
    # a small panel's rate would grow as 1 / its haplotypes, and sparse typed sites tell its haplotypes apart less
    site_switch: float = 0.1
    error: float = 1e-3  # probability of showing an allele other than the copied one
    # a state whose posterior stays below this over a stretch of typed sites is left out of the untyped records
    # there, each record's sum divided by the posterior of the states kept: the states skipped hardly move the
    # error at this floor and take most of the untyped records' time; a higher floor begins to cost error.
    # Dividing by the states kept, rather than counting the skipped ones as carrying the minor allele at its
    # panel frequency or as carrying none, is what keeps the error down (see docs/results.md)
    posterior_floor: float = 3e-4
    # typed sites each forward-backward imputes, twice as many from more_neighbours_from haplotypes: a segment's
    # margins reach at most half its sites, and the larger the panel the farther the sites the model weighs: in
    # the largest panels longer segments lower the rarest variants' error, while in smaller ones they trade
    # error between bins for more memory (see docs/results.md)
    segment_sites: int = 2000
    margin_sites: int = 200  # typed sites either side of a segment its forward-backward also reads, at least
    # ... and as many more as the copying model switches this many times across, on average (switch_cm), up to
    # half the core's sites (core_sites): the fewer its switches, the farther the sites it weighs, which a larger
    # panel pushes out
    margin_switches: float = 2.0

    def switch_cm(self, n_haplotypes: int, site_cm: float) -> float:
        """cM over which the copying model switches state once on average (config.switch_cm)."""
        return switch_cm(n_haplotypes, site_cm, self.ne, self.site_switch)

    def passes(self, n_haplotypes: int) -> tuple[tuple[int, int], ...]:
        """(neighbours, states) of each forward-backward pass whose P(alt)
        are averaged, in a panel of n_haplotypes."""
        more = 2 if n_haplotypes >= self.large_states_from else 1
        wider = self._widened(n_haplotypes)
        wide = ((self.wide_neighbours, more * self.wide_states),) if self.wide_states else ()
        return ((wider * self.neighbours, wider * more * self.max_states),) + wide

    def core_sites(self, n_haplotypes: int) -> int:
        """Typed sites each forward-backward imputes in a panel of n_haplotypes."""
        return self.segment_sites * self._widened(n_haplotypes)

    def _widened(self, n_haplotypes: int) -> int:
        """2 from more_neighbours_from haplotypes, else 1: one threshold
        doubles the neighbours, the states and the segments together."""
        return 2 if n_haplotypes >= self.more_neighbours_from else 1

    def __post_init__(self):
        for name, low in (("neighbours", 1), ("max_states", 1), ("wide_neighbours", 1), ("wide_states", 0),
                          ("sight_every", 1), ("segment_sites", 1), ("margin_sites", 0), ("large_states_from", 0),
                          ("more_neighbours_from", 0)):
            if getattr(self, name) < low:
                raise ValueError(f"copying {name}: expected at least {low}; found {getattr(self, name)}")
        if not 0 < self.site_switch <= 1:
            raise ValueError(f"copying site_switch: expected a probability in (0, 1]; found {self.site_switch}")
        if not self.margin_switches >= 0:
            raise ValueError(f"copying margin_switches: expected at least 0; found {self.margin_switches}")
        if not self.ne > 0:
            raise ValueError(f"copying ne: expected a positive effective population size; found {self.ne}")
        if not 0 <= self.posterior_floor < 1:
            raise ValueError(f"copying posterior_floor: expected a probability in [0, 1); found {self.posterior_floor}")
        if not 0 < self.error < 0.5:
            raise ValueError(f"copying error: expected a probability in (0, 0.5); found {self.error}")
