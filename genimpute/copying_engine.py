"""Imputation by the region-wide copying model (genimpute.copying) on the
target's typed sites, contig by contig: untyped records, missing calls and
--validate's hidden sites alike."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel
from genimpute.copying.model import _impute_segment
from genimpute.errors import InputError
from genimpute.io.vcf_reader import MISSING
from genimpute.panel import Alignment, ReferencePanel
from genimpute.runtime import announce_first_compile

log = logging.getLogger(__name__)


def announce_compile() -> None:
    """Say so when this run compiles the engine and the loops around it
    (reading, the panel-duplicate search, writing): numba's cache has no
    code for the engine's entry point."""
    announce_first_compile(_impute_segment, "the copying engine and the loops around it", 60)


class CopyingEngine:
    """The engine interface of genimpute.imputation (windows, probabilities,
    fill_missing, validate, description) over the copying model's segments."""

    def __init__(self, panel: ReferencePanel, aln: Alignment, typed_mask: np.ndarray, settings: CopyingSettings,
                 in_panel: np.ndarray):
        self.panel, self.aln, self.typed_mask, self.settings = panel, aln, typed_mask, settings
        self.models: dict[int, ContigModel] = {}
        self._queries_of: tuple = (None, None)  # (contig, its _queries)
        self.excluded = np.repeat(in_panel, 2).astype(np.int64)  # the panel sample each haplotype may not copy
        if (in_panel >= 0).any() and panel.n_haplotypes <= 2:  # a window of neighbours always holds another one
            raise InputError("the reference panel's only sample is a target sample; expected other haplotypes to "
                             "copy from")

    @property
    def description(self) -> str:
        return f"copying engine ({', '.join(f'{k}={v}' for k, v in dataclasses.asdict(self.settings).items())})"

    def model(self, contig: int) -> ContigModel:
        """The contig's model, the others' last segment dropped: imputation
        goes contig by contig, and each would keep a segment's index (most
        of the engine's memory in a large panel) to the end of the run."""
        if contig not in self.models:
            self.models[contig] = ContigModel(self.panel, contig, self.typed_mask, self.settings)
        for other, model in self.models.items():
            if other != contig:
                model.drop_built()
        return self.models[contig]

    def windows(self, contigs: list, in_region: np.ndarray) -> dict:
        """{contig key: segments with records in the region}."""
        return {c.key: [s for s in self.model(c.panel_index).segments() if in_region[s.predicted].any()]
                for c in contigs if c.panel_index is not None}

    def probabilities(self, segment, haplotypes: slice) -> np.ndarray:
        """(U, len(haplotypes)) P(alt) of those target haplotypes at the segment's untyped records."""
        queries = self._queries(segment.contig)[:, haplotypes]
        return self.model(segment.contig).probabilities(segment, queries, self.excluded[haplotypes])[0]

    def _queries(self, contig: int) -> np.ndarray:
        """(t, 2S) int8 the target's alleles at the contig's typed sites, read once for all its segments."""
        if self._queries_of[0] != contig:
            self._queries_of = contig, np.ascontiguousarray(self.aln.alleles_at(self.model(contig).typed_rows))
        return self._queries_of[1]

    def _at_sites(self, contig: int, wanted: np.ndarray, hide: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(records, P(alt), observed alleles), each (u, 2S) but records
        (u,): the typed records of `contig` that `wanted` (M,) marks, P(alt)
        at their missing calls (at all their calls if `hide`, as if those
        were missing too; NaN at the others)."""
        model = self.model(contig)
        observed = self._queries(contig)
        wanted = wanted[model.typed_rows]
        queries = observed.copy()
        if hide:
            queries[wanted] = MISSING
        probs = model.typed_probabilities(queries, self.excluded, wanted)
        return model.typed_rows[wanted], probs[wanted], observed[wanted]

    def fill_missing(self, eligible: np.ndarray) -> dict:
        """P(alt) (2S,) of every target haplotype at each typed record (among
        `eligible` ones) where some call is missing, by panel record (NaN
        where the call is there)."""
        has_missing = self.aln.records_with_missing_calls(len(self.panel)) & eligible
        filled = {}
        for contig in np.unique(self.panel.contig_index[has_missing]):
            rows, probs, _ = self._at_sites(int(contig), has_missing, hide=False)
            filled.update(zip(rows.tolist(), probs))
        if filled:
            log.info("%d typed records have missing calls: imputed by the copying model", len(filled))
        return filled

    def validate(self, fraction: float, seed: int, eligible: np.ndarray):
        """genimpute.validation's estimate, the hidden sites imputed by the copying model."""
        from genimpute.validation import masked_sites, score

        masked = masked_sites(self.panel, self.typed_mask, fraction, seed, eligible)
        predictions = (self._at_sites(int(c), masked, hide=True) for c in np.unique(self.panel.contig_index[masked]))
        return score(predictions, fraction, seed, int(masked.sum()))
