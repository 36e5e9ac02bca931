"""What each part of a backbone with copying evidence is worth (issue 27),
on the model's held-out panel samples (validation_by_maf's windows, every
4th): the model as trained; its match alone (the correction's gate at 0);
and the correction without match's log-odds as an input channel (the
channel's weights at 0, the rows and the gate as trained).

    python benchmarks/experiments/evidence_channels.py MODEL_DIR ARRAY

Prints one line per variant: r2 per MAF bin and overall, and seconds.
"""

import copy
import sys

import torch

from genimpute.modeldir import load_model_dir
from validation_by_maf import by_bin, held_out_imputation


def variants(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """The model as trained, and with one part of its evidence turned off."""
    match_alone, no_channel = copy.deepcopy(model), copy.deepcopy(model)
    with torch.no_grad():
        match_alone.evidence.gate.zero_()
        no_channel.evidence.channel.weight.zero_()
        no_channel.evidence.channel.bias.zero_()
    return {"as trained": model, "match alone (gate 0)": match_alone, "no log-odds channel": no_channel}


def main(model_dir: str, array: str) -> None:
    model = load_model_dir(model_dir).model
    if getattr(model, "evidence", None) is None:
        raise SystemExit(f"{model_dir}: expected a model trained with --evidence; found {model.config.name} without")
    print(f"{model_dir}: gate {model.evidence.gate.item():.4f}")
    for name, variant in variants(model).items():
        run = held_out_imputation(model_dir, array, model=variant)
        print(f"  {name:22s} {by_bin(run['dosage'], run['true_dosage'], run['bins'])} ({run['seconds']:.0f} s)")


if __name__ == "__main__":
    main(*sys.argv[1:])
