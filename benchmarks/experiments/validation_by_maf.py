"""Held-out validation by MAF bin (issue 4): the aggregate r2 of a trained
model on its validation samples (the panel samples training held out), by
panel MAF bin, over every 4th imputation window of the panel. The samples'
haplotypes are the queries, their typed alleles the evidence, and no
validation sample is in any context. Benchmark targets are never used, so
this is the figure to compare training recipes with.

    python benchmarks/experiments/validation_by_maf.py MODEL_DIR ARRAY [k]

Prints one line: the model, k, r2 per MAF bin (bins as `genimpute
evaluate`), the aggregate over all bins, and the seconds it took.
"""

import sys
import time
from dataclasses import replace

import numpy as np
import torch

from genimpute.evaluation import BIN_LABELS, maf_bin
from genimpute.io.array_list import read_array_list
from genimpute.metrics import pooled_r2
from genimpute.modeldir import load_model_dir
from genimpute.panel import array_typed_mask
from genimpute.predict import window_probabilities
from genimpute.training_set import TrainingSet
from genimpute.windows import plan_windows


def held_out_imputation(model_dir: str, array: str, k: int | None = None, stride: int = 4,
                        model: torch.nn.Module | None = None) -> dict:
    """The model's held-out samples imputed from their typed sites over
    every `stride`-th window (by `model` when given: the directory's with
    other weights): panel, held_out (TrainingSet), columns (V,),
    dosage and true_dosage (V, samples), bins (V,) by MAF among the
    training haplotypes, k, windows, seconds."""
    loaded = load_model_dir(model_dir)
    config, panel = loaded.config, loaded.panel
    k = k or config.window.context
    typed_mask = array_typed_mask(panel, read_array_list(array))
    held_out = TrainingSet(panel, typed_mask, config.train.val_fraction, config.train.seed)
    queries = held_out.val_haps
    exclude = np.broadcast_to(held_out.is_val, (len(queries), len(held_out.is_val)))
    windows = plan_windows(panel.contig_index, panel.positions, typed_mask, config.window.untyped,
                           config.window.typed)[::stride]
    model, window_config = (model or loaded.model).eval(), replace(config.window, context=k)
    started = time.monotonic()
    columns, probs = [], []
    for window in windows:
        haps = panel.haplotypes(window.columns)  # (M, H)
        probs.append(window_probabilities(model, window, haps, haps[window.typed][:, queries].T,
                                          panel.centimorgans[window.columns], window_config, torch.device("cpu"),
                                          exclude))
        columns.append(window.columns[~window.typed])
    seconds = time.monotonic() - started
    columns, probs = np.concatenate(columns), np.concatenate(probs)
    haps = panel.haplotypes(columns)
    truth = haps[:, queries].astype(float)
    alt_share = haps[:, held_out.train_haps].mean(axis=1)
    return dict(panel=panel, held_out=held_out, columns=columns, dosage=probs[:, 0::2] + probs[:, 1::2],
                true_dosage=truth[:, 0::2] + truth[:, 1::2], bins=maf_bin(np.minimum(alt_share, 1 - alt_share)),
                k=k, windows=len(windows), seconds=seconds)


def by_bin(dosage: np.ndarray, true_dosage: np.ndarray, bins: np.ndarray) -> str:
    """Aggregate r2 per MAF bin, then over all: 'label r2 ... all r2'."""
    per_bin = " ".join(f"{label} {pooled_r2(dosage[bins == i], true_dosage[bins == i]):.4f}"
                       for i, label in enumerate(BIN_LABELS))
    return f"{per_bin} all {pooled_r2(dosage, true_dosage):.4f}"


def main(model_dir: str, array: str, k: str | None = None) -> None:
    run = held_out_imputation(model_dir, array, int(k) if k else None)
    print(f"{model_dir} k={run['k']}: {by_bin(run['dosage'], run['true_dosage'], run['bins'])} "
          f"({run['windows']} windows, {run['seconds']:.0f} s)")


if __name__ == "__main__":
    main(*sys.argv[1:])
