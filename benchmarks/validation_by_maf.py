"""Held-out validation by MAF bin (issue 4): the aggregate r2 of a trained
model on its validation samples (the panel samples training held out), by
panel MAF bin, over every 4th imputation window of the panel. The samples'
haplotypes are the queries, their typed alleles the evidence, and no
validation sample is in any context. Benchmark targets are never used, so
this is the figure to compare training recipes with.

    python benchmarks/validation_by_maf.py MODEL_DIR ARRAY [k]

Prints one line: the model, k, r2 per MAF bin (bins as `genimpute
evaluate`), the aggregate over all bins, and the seconds it took.
"""

import sys
import time
from dataclasses import replace

import numpy as np
import torch

from genimpute.evaluate import BIN_LABELS, maf_bin
from genimpute.io.array_list import read_array_list
from genimpute.modeldir import load_model_dir
from genimpute.panel import array_typed_mask
from genimpute.predict import window_probabilities
from genimpute.train import TrainingSet, pooled_r2
from genimpute.windows import plan_windows


def main(model_dir: str, array: str, k: str | None = None) -> None:
    loaded = load_model_dir(model_dir)
    config, panel = loaded.config, loaded.panel
    k = int(k) if k else config.window.context
    typed_mask = array_typed_mask(panel, read_array_list(array))
    held_out = TrainingSet(panel, typed_mask, config.train.val_fraction, config.train.seed)
    queries = held_out.val_haps
    exclude = np.broadcast_to(held_out.is_val, (len(queries), len(held_out.is_val)))
    windows = plan_windows(panel.contig_index, panel.positions, typed_mask, config.window.untyped,
                           config.window.typed)[::4]
    model, window_config = loaded.model.eval(), replace(config.window, context=k)
    started = time.monotonic()
    probs, truth, alt_share = [], [], []
    for window in windows:
        haps = panel.haplotypes(window.columns)  # (M, H)
        probs.append(window_probabilities(model, window, haps, haps[window.typed][:, queries].T,
                                          panel.centimorgans[window.columns], window_config, torch.device("cpu"),
                                          exclude))
        truth.append(haps[~window.typed][:, queries])
        alt_share.append(haps[~window.typed][:, held_out.train_haps].mean(axis=1))
    probs, truth, alt_share = np.concatenate(probs), np.concatenate(truth).astype(float), np.concatenate(alt_share)
    dosage, true_dosage = probs[:, 0::2] + probs[:, 1::2], truth[:, 0::2] + truth[:, 1::2]  # (V, samples)
    bins = maf_bin(np.minimum(alt_share, 1 - alt_share))
    by_bin = " ".join(f"{label} {pooled_r2(dosage[bins == i], true_dosage[bins == i]):.4f}"
                      for i, label in enumerate(BIN_LABELS))
    print(f"{model_dir} k={k}: {by_bin} all {pooled_r2(dosage, true_dosage):.4f} "
          f"({len(windows)} windows, {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main(*sys.argv[1:])
