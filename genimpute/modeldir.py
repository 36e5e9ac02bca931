"""The model directory: what `train` writes and `impute` reads.

    config.json      RunConfig (window, model, train settings)
    model.pt         final weights
    provenance.json  version, command line, each panel (file, array, held-out samples),
                     the panels' fingerprint, steps
    panel.npz        the bit-packed reference panel the model was trained with
                     (absent when it was trained on several panels)
    checkpoint.pt    training state for --resume (weights, optimizer, step)

Every file is written to a temporary name and renamed into place, so an
interrupted run never leaves a truncated file behind.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from genimpute.config import RunConfig
from genimpute.errors import CheckpointError
from genimpute.panel import ReferencePanel

if TYPE_CHECKING:  # torch is imported where weights are read or written: the paths here need none of it
    import torch

CONFIG, WEIGHTS, PROVENANCE, PANEL, CHECKPOINT = (
    "config.json", "model.pt", "provenance.json", "panel.npz", "checkpoint.pt",
)


# the model shipped inside the package: weights, config and provenance, no panel
PRETRAINED_DIR = Path(__file__).parent / "pretrained"


def default_model_dir() -> Path:
    """$GENIMPUTE_MODEL, else $XDG_DATA_HOME/genimpute/model
    (~/.local/share/genimpute/model)."""
    if os.environ.get("GENIMPUTE_MODEL"):
        return Path(os.environ["GENIMPUTE_MODEL"])
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "genimpute" / "model"


def atomic_write(path: Path, write) -> None:
    """Call write(tmp_path), then rename tmp_path to path."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_json(path: Path, obj: dict) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=2) + "\n"))


def save_torch(path: Path, obj: dict) -> None:
    import torch

    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def load_torch(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # truncated or foreign files raise many kinds
        raise CheckpointError(f"{path}: cannot be loaded; truncated or not a genimpute file ({exc})") from exc


@dataclass
class LoadedModel:
    model: torch.nn.Module
    config: RunConfig
    panel: ReferencePanel
    provenance: dict


def read_settings(directory: str | Path) -> tuple[RunConfig, dict]:
    """The settings and provenance of the model in `directory`."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: no model directory; expected the output of `genimpute train` "
            "(pass --model, or train with no --out to use the default location)"
        )
    try:
        return (RunConfig.from_dict(json.loads((directory / CONFIG).read_text())),
                json.loads((directory / PROVENANCE).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{directory}: config.json or provenance.json missing or malformed ({exc})") from exc


def load_weights(directory: str | Path) -> tuple[torch.nn.Module, RunConfig, dict]:
    """The model in `directory` (in eval mode), its settings and provenance."""
    from genimpute.models import build_model

    directory = Path(directory)
    config, provenance = read_settings(directory)
    model = build_model(config.model)
    state = load_torch(directory / WEIGHTS)
    try:
        model.load_state_dict(state["model"])
    except (KeyError, RuntimeError) as exc:
        raise CheckpointError(f"{directory / WEIGHTS}: weights do not fit the model in config.json ({exc})") from exc
    model.eval()
    return model, config, provenance


def load_model_dir(directory: str | Path, panel: ReferencePanel | None = None) -> LoadedModel:
    """The model in `directory`, imputing from its own panel, or from `panel`
    when given (a model trained on several panels has none of its own)."""
    directory = Path(directory)
    model, config, provenance = load_weights(directory)
    if panel is None:
        if not (directory / PANEL).exists():
            raise CheckpointError(f"{directory}: the model has no panel of its own (trained on several, or shipped "
                                  "pretrained); pass the reference panel with --ref")
        panel = ReferencePanel.load(directory / PANEL)
        if panel.fingerprint() != provenance.get("panel_fingerprint"):
            raise CheckpointError(f"{directory}: panel.npz does not match the panel the model was trained with")
    return LoadedModel(model, config, panel, provenance)
