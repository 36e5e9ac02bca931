"""Frozen settings. Every model directory stores them, so a checkpoint rebuilds
its model and windows with no flags."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WindowConfig:
    # the defaults are the default backbone's; the CLI takes each backbone's own `default_window`
    untyped: int = 300  # U: consecutive untyped variants predicted by one window
    typed: int = 300  # T: typed variants nearest to them, given as evidence
    context: int = 128  # k: panel haplotypes nearest to the query by L1 on typed sites
    # the nearest-haplotype distance counts a mismatch at near_weight times
    # the rest at the typed sites of the predicted block's span and the
    # near_sites on either side of it: the haplotypes to copy are those that
    # match where the predicted variants are (BENCHMARKS.md); 1 is plain Hamming
    near_sites: int = 20
    near_weight: int = 6

    def __post_init__(self):
        for name in ("untyped", "typed", "context", "near_weight"):
            if getattr(self, name) < 1:
                raise ValueError(f"window {name} must be >= 1; found {getattr(self, name)}")
        if self.near_sites < 0:
            raise ValueError(f"window near_sites must be >= 0; found {self.near_sites}")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "match"
    dim: int = 32
    layers: int = 2
    heads: int = 4
    ffn_mult: int = 2
    max_columns: int = 512  # longest window (U + T) the column embedding covers
    # SPIN only
    kmer: int = 5  # K: consecutive untyped (or typed) variants per token, 2^K classes
    latents: int = 8  # F': latent attributes each haplotype is summarised into
    inducing: int = 64  # h: inducing points summarising a window's panel haplotypes
    # nearest panel haplotypes (L1 on typed sites) whose target tokens each
    # query reads, column by column; 0 is the paper's SPIN
    neighbours: int = 0
    # NPSSM only
    state: int = 16  # S: state size of each selective scan
    # match only: each gap's vote is over this many context rows, those with
    # the fewest mismatches with the query among the 8 typed sites on either
    # side (the rest would get almost no weight); 0 scores all k rows
    rows_per_gap: int = 24

    def __post_init__(self):
        if self.rows_per_gap < 0:
            raise ValueError(f"rows_per_gap must be >= 0; found {self.rows_per_gap}")
        if self.neighbours < 0:
            raise ValueError(f"neighbours must be >= 0; found {self.neighbours}")
        if self.neighbours and self.name != "spin":
            raise ValueError(f"neighbours: only the spin backbone reads neighbours; found model {self.name}")


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

    window: WindowConfig = field(default_factory=WindowConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """From to_dict's form, every setting present (a stored config of an
        older model-directory format is completed by genimpute.modeldir)."""
        return cls(window=WindowConfig(**d["window"]), model=ModelConfig(**d["model"]), train=TrainConfig(**d["train"]))


# Cell tokens shared by the windowing code and every backbone.
REF, ALT, MASKED = 0, 1, 2
N_TOKENS = 3

# external phasers `genimpute impute` can phase an unphased target with, in order of preference
PHASERS = ("beagle", "shapeit4")

# tools `genimpute benchmark` knows how to run, in report order
BENCHMARK_TOOLS = ("genimpute", "beagle", "minimac4")

# share of the typed sites `impute --validate` hides to estimate accuracy
DEFAULT_VALIDATION_FRACTION = 0.05


@dataclass(frozen=True)
class CopyingSettings:
    """The region-wide copying engine's settings (genimpute.copying)."""

    neighbours: int = 16  # PBWT neighbours taken on each side of the target at every typed site, each direction
    max_states: int = 400  # most states per haplotype and segment: the most often chosen are kept
    ne: float = 3e5  # effective population size in the switch rate, 0.04 ne cM / (panel haplotypes + haplotype_offset)
    haplotype_offset: int = 200  # keeps the switch rate of a small panel from growing as 1 / its haplotypes
    error: float = 1e-3  # probability of showing an allele other than the copied one
    segment_sites: int = 2000  # typed sites each forward-backward imputes
    margin_sites: int = 200  # typed sites either side of a segment its forward-backward also reads

    def __post_init__(self):
        for name, low in (("neighbours", 1), ("max_states", 1), ("segment_sites", 1), ("margin_sites", 0),
                          ("haplotype_offset", 0)):
            if getattr(self, name) < low:
                raise ValueError(f"copying {name}: expected at least {low}; found {getattr(self, name)}")
        if not self.ne > 0:
            raise ValueError(f"copying ne: expected a positive effective population size; found {self.ne}")
        if not 0 < self.error < 0.5:
            raise ValueError(f"copying error: expected a probability in (0, 0.5); found {self.error}")
