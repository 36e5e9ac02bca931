"""Test-time context expansion (issue 4): the validation r2 of a trained
model when it imputes with k context haplotypes other than the k it was
trained with. Validation is on the model's held-out panel samples (the same
windows and queries as training's validation), never on benchmark targets.

    python benchmarks/experiments/context_expansion.py MODEL_DIR ARRAY 24,48,96,16

Prints one JSON line per k: validation r2 and the seconds it took.
"""

import dataclasses
import json
import sys
import time

import torch

from genimpute.heldout import Validator
from genimpute.io.array_list import read_array_list
from genimpute.modeldir import load_model_dir
from genimpute.panel import array_typed_mask
from genimpute.training_set import TrainingSet


def main(model_dir: str, array: str, ks: str) -> None:
    loaded = load_model_dir(model_dir)
    config = loaded.config
    typed_mask = array_typed_mask(loaded.panel, read_array_list(array))
    training_set = TrainingSet(loaded.panel, typed_mask, config.train.val_fraction, config.train.seed)
    for k in map(int, ks.split(",")):
        validator = Validator([training_set], dataclasses.replace(config, window=dataclasses.replace(config.window, context=k)))
        started = time.monotonic()
        r2 = validator.r2(loaded.model, torch.device("cpu"))
        print(json.dumps({"k": k, "val_r2": round(r2, 5), "seconds": round(time.monotonic() - started, 1)}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
