"""Imputation by a model directory's backbone (`impute --engine model`):
its windows of untyped and typed records, each run for a batch of target
haplotypes; missing calls and --validate's hidden sites by the same model."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genimpute.errors import InputError
from genimpute.panel import Alignment, ReferencePanel
from genimpute.windows import plan_windows, typed_record_windows

log = logging.getLogger(__name__)


@dataclass
class ModelSource:
    """The model directory's model, loaded on first use: a copying run with
    a reference panel given never needs it, nor torch (slow to import)."""

    model_dir: Path
    panel: ReferencePanel | None  # None: the directory's own
    device_name: object  # a torch.device, or a name for runtime.pick_device
    device: object = None  # the torch.device, once loaded
    _loaded: object = None

    def loaded(self):
        if self._loaded is None:
            from genimpute.modeldir import load_model_dir
            from genimpute.runtime import pick_device

            self._loaded = load_model_dir(self.model_dir, self.panel)
            device = pick_device(self.device_name) if isinstance(self.device_name, str) else self.device_name
            self._loaded.model.to(device)
            self.device = device
        return self._loaded

    def model(self):
        """(model on its device, window settings, device)."""
        loaded = self.loaded()
        return loaded.model, loaded.config.window, self.device


def exclusion_matrix(in_panel: np.ndarray, n_haplotypes: int) -> np.ndarray | None:
    """(2S, H) bool: the panel haplotypes of each target haplotype's own
    sample (the model's windows read exclusions so); None when there are none."""
    if not (in_panel >= 0).any():
        return None
    exclude = np.zeros((2 * len(in_panel), n_haplotypes), dtype=bool)
    for s, p in enumerate(in_panel):
        if p >= 0:
            exclude[2 * s: 2 * s + 2, 2 * p: 2 * p + 2] = True
    return exclude


class ModelEngine:
    """The engine interface of genimpute.imputation (windows, probabilities,
    fill_missing, validate, description) over the model's windows."""

    def __init__(self, source: ModelSource, panel: ReferencePanel, aln: Alignment, typed_mask: np.ndarray,
                 in_panel: np.ndarray):
        self.source, self.panel, self.aln, self.typed_mask = source, panel.in_memory(), aln, typed_mask
        self.exclude = exclusion_matrix(in_panel, panel.n_haplotypes)

    @property
    def description(self) -> str:
        loaded = self.source.loaded()
        return f"{self.source.model_dir.resolve()} ({loaded.config.model.name}, {loaded.provenance.steps} steps)"

    def windows(self, contigs: list, in_region: np.ndarray) -> dict:
        """{contig key: the model's windows with records in the region}."""
        _, wcfg, _ = self.source.model()
        return {
            c.key: [w for w in plan_windows(self.panel.contig_index, self.panel.positions, self.typed_mask,
                                            wcfg.untyped, wcfg.typed, [c.panel_index]) if in_region[w.predicted].any()]
            for c in contigs if c.panel_index is not None
        }

    def probabilities(self, window, haplotypes: slice) -> np.ndarray:
        """(U, len(haplotypes)) P(alt) of those target haplotypes at the window's untyped records."""
        from genimpute.predict import target_window_probabilities

        model, wcfg, device = self.source.model()
        batch = dataclasses.replace(self.aln, haplotypes=self.aln.haplotypes[:, haplotypes])
        return target_window_probabilities(model, window, self.panel, batch, wcfg, device,
                                           None if self.exclude is None else self.exclude[haplotypes])

    def fill_missing(self, eligible: np.ndarray) -> dict:
        """P(alt) (2S,) of every target haplotype at each typed record (among
        `eligible` ones) where some call is missing, by panel record: imputed
        like an untyped record, from the other typed records around it.

        Windows are planned over the whole of each contig with eligible
        records and only those predicting an eligible record are run, so a
        region's filled calls equal a whole-contig run's."""
        has_missing = self.aln.records_with_missing_calls(len(self.panel))
        has_missing &= np.isin(self.panel.contig_index, np.unique(self.panel.contig_index[eligible]))
        n_wanted = int((has_missing & eligible).sum())
        if not n_wanted:
            return {}
        from genimpute.predict import target_window_probabilities

        model, wcfg, device = self.source.model()
        windows = [w for w in self._missing_call_windows(has_missing, wcfg) if eligible[w.predicted].any()]
        log.info("%d typed records have missing calls: imputing them in %d windows", n_wanted, len(windows))
        filled = {}
        for window in windows:
            probs = target_window_probabilities(model, window, self.panel, self.aln, wcfg, device, self.exclude)
            filled.update((r, p) for r, p in zip(window.predicted.tolist(), probs) if eligible[r])
        return filled

    def _missing_call_windows(self, has_missing: np.ndarray, wcfg) -> list:
        # Blocks of 20 records interleaved by 5 (defaults) keep most of a record's
        # nearest typed neighbours as evidence: more filled calls come out right
        # than with contiguous blocks, at about as many windows (see docs/results.md)
        block = max(1, min(wcfg.typed // 10, int(self.typed_mask.sum()) // 2))
        try:
            return typed_record_windows(self.panel.contig_index, self.panel.positions, self.typed_mask, has_missing,
                                        block, wcfg.typed, stride=max(1, wcfg.typed // (2 * block)))
        except ValueError as exc:
            raise InputError(f"missing calls: expected other typed records to impute them from; {exc}") from exc

    def validate(self, fraction: float, seed: int, eligible: np.ndarray):
        """genimpute.validation's estimate, the hidden sites imputed by the model's windows."""
        from genimpute.validation import validate

        model, wcfg, device = self.source.model()
        return validate(model, self.panel, self.aln, self.typed_mask, wcfg, fraction, seed, device,
                        eligible=eligible, exclude=self.exclude)
