"""The reference panels as training sees them: read with their arrays'
typed sites, their samples split into training and held-out ones, and
windows drawn at random places."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from genimpute.errors import InputError
from genimpute.io.array_list import read_array_list
from genimpute.io.genetic_map import GeneticMap
from genimpute.io.sparse_rows import SparseSpool
from genimpute.modeldir import PanelRecord
from genimpute.panel import ReferencePanel, array_typed_mask, is_compact, read_reference
from genimpute.windows import Window, contig_rows, window_for_block

log = logging.getLogger(__name__)


class TrainingSet:
    """The panel, its typed sites, and the split of samples into train/val."""

    def __init__(self, panel: ReferencePanel, typed_mask: np.ndarray, val_fraction: float, seed: int):
        self.panel, self.typed_mask = panel, typed_mask
        n_samples = len(panel.samples)
        n_val = int(round(val_fraction * n_samples))
        if n_samples - n_val < 3:
            raise InputError(f"panel: expected at least 3 training samples; found {n_samples - n_val}")
        val_samples = np.random.default_rng([seed, 7]).choice(n_samples, n_val, replace=False)
        self.is_val = np.zeros(panel.n_haplotypes, bool)  # (H,)
        self.is_val[2 * val_samples] = self.is_val[2 * val_samples + 1] = True
        self.train_haps = np.nonzero(~self.is_val)[0]
        self.val_haps = np.nonzero(self.is_val)[0]
        self.contigs = []  # (contig, untyped rows, typed rows) with something to predict
        for c in range(len(panel.contig_names)):
            untyped, typed = contig_rows(panel.contig_index, c, typed_mask)
            if len(untyped) and len(typed):
                self.contigs.append((c, untyped, typed))
        if not self.contigs:
            raise InputError("panel: expected untyped and typed records on one contig; found none")
        weights = np.array([len(u) for _, u, _ in self.contigs], float)
        self.contig_weights = weights / weights.sum()

    @property
    def n_untyped(self) -> int:
        return sum(len(u) for _, u, _ in self.contigs)

    def random_window(self, rng: np.random.Generator, n_untyped: int, n_typed: int,
                      min_density: float = 1.0) -> Window:
        """A window at a random place. With min_density < 1, only a random
        share in [min_density, 1] of the array's sites stay typed and the rest
        are imputed, as with a sparser array."""
        c, untyped, typed = self.contigs[rng.choice(len(self.contigs), p=self.contig_weights)]
        if min_density < 1:
            keep = rng.random(len(typed)) < rng.uniform(min_density, 1)
            keep[rng.integers(len(typed))] = True
            untyped, typed = np.union1d(untyped, typed[~keep]), typed[keep]
        start = rng.integers(0, max(1, len(untyped) - n_untyped + 1))
        return window_for_block(untyped[start: start + n_untyped], typed, self.panel.positions, n_typed, c)

    def maf_weights(self, window: Window, haps: np.ndarray, exponent: float) -> np.ndarray:
        """(M,) float32 from haps (M, H): 1 at typed columns; MAF^-exponent at
        untyped ones, MAF among training haplotypes (at least one haplotype's
        share), scaled to mean 1."""
        weights = np.ones(len(window.typed), np.float32)
        if exponent:
            alt = haps[~window.typed][:, self.train_haps].mean(axis=1)
            maf = np.maximum(np.minimum(alt, 1 - alt), 1 / len(self.train_haps))
            untyped = maf ** -exponent
            weights[~window.typed] = untyped / untyped.mean()
        return weights

    def provenance(self, ref: str | Path, array: str | Path) -> PanelRecord:
        """What a model directory records of this panel, read from `ref` with `array`."""
        return PanelRecord(panel=str(ref), array=str(array), samples=len(self.panel.samples), records=len(self.panel),
                           typed_sites=int(self.typed_mask.sum()),
                           validation_samples=tuple(self.panel.samples[h // 2] for h in self.val_haps[::2]))


def array_per_panel(refs: list, arrays: list) -> list:
    """One array for every panel, or one per panel."""
    if len(arrays) not in (1, len(refs)):
        raise InputError(f"--array: expected one array for every panel or one per --ref ({len(refs)}); found {len(arrays)}")
    return arrays * len(refs) if len(arrays) == 1 else arrays


def training_panels(refs: list, arrays: list, genetic_map: str | Path | None,
                    spool_dir: str | Path) -> list[tuple[ReferencePanel, np.ndarray]]:
    """Each panel, with the map's genetic positions if given, and its (records,) typed mask."""
    genetic_map = GeneticMap(genetic_map) if genetic_map is not None else None  # read once for every panel
    panels = []
    for ref, array in zip(refs, arrays):
        panel = _in_memory(ref, spool_dir)
        if genetic_map is not None:
            panel = panel.with_genetic_map(genetic_map)
        typed_mask = array_typed_mask(panel, read_array_list(array))
        log.info("panel %s: %d samples, %d records, %d typed by %s", ref, len(panel.samples), len(panel),
                 typed_mask.sum(), array)
        panels.append((panel, typed_mask))
    return panels


def _in_memory(ref: str | Path, spool_dir: str | Path) -> ReferencePanel:
    """The panel with its records in memory, the rare ones listed
    (ReferencePanel.in_memory). A VCF/BCF's go through a spool in
    `spool_dir` as they are read: gathered in memory, their blocks and the
    array joined from them took twice the packed panel."""
    if is_compact(ref):
        return read_reference(ref).in_memory()
    with SparseSpool(spool_dir) as spool:
        return read_reference(ref, spool).in_memory()


def panels_fingerprint(panels: list[tuple[ReferencePanel, np.ndarray]]) -> str:
    """The panel's fingerprint; for several, one over theirs in order."""
    prints = [panel.fingerprint() for panel, _ in panels]  # hashes every haplotype: computed once
    return prints[0] if len(prints) == 1 else hashlib.sha256(" ".join(prints).encode()).hexdigest()
