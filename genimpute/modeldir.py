"""The model directory: what `train` writes and `impute` reads.

    config.json      RunConfig (window settings, the backbone's own settings with its name, train settings)
    model.pt         final weights
    provenance.json  the directory's format, version, command line, each panel
                     (file, array, held-out samples), the panels' fingerprint, steps
    panel.npz        the reference panel the model was trained with, as a compact
                     panel keeps it (absent when it was trained on several panels)
    checkpoint.pt    training state for --resume (weights, optimizer, step), with its format

Only this module knows the files' keys: the rest of genimpute reads and
writes typed records (RunConfig, Provenance, Checkpoint). The directory has
a format (FORMAT below): one of an older format reads as the current one,
what it lacks given the defaults listed under "Formats", the one place that
knows a directory's age; one of a newer format is refused before anything
else in it is read.

Every file is written to a temporary name and renamed into place, so an
interrupted run never leaves a truncated file behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from genimpute.config import RunConfig, TrainConfig, WindowConfig
from genimpute.errors import CheckpointError
from genimpute.io.scratch import write_whole
from genimpute.panel import ReferencePanel

if TYPE_CHECKING:  # torch is imported where weights are read or written: the paths here need none of it
    import torch

CONFIG, WEIGHTS, PROVENANCE, PANEL, CHECKPOINT = (
    "config.json", "model.pt", "provenance.json", "panel.npz", "checkpoint.pt",
)


# the model shipped inside the package: weights, config and provenance, no panel
PRETRAINED_DIR = Path(__file__).parent / "pretrained"


class ModelFormatError(CheckpointError):
    """A model directory or checkpoint of a format this genimpute cannot read."""


# --- Formats ------------------------------------------------------------------
# Written as "format": "genimpute-model/N" in provenance.json and checkpoint.pt
# (a checkpoint may stand alone: a run stopped before its end has no provenance).
#
# Format 1: every directory written before the format field. Its files took
# shape over several changes, and a format-1 directory may predate any of
# them; what it lacks reads as the code before formats read it:
#   provenance "processes" (train --distributed, a28b32c): 1, the one process there was
#   provenance "panels" (several panels, 7a06098): one panel, from the top-level
#     "panel", "array", "typed_sites" and "validation_samples"; its "samples" and
#     "records" were not recorded (None)
#   "initialised_from" in provenance and checkpoint (train --init, bcbeb6f): None
#   config window "near_weight" (9ec9121): 1, the plain Hamming distance that chose
#     the context then ("near_sites" is moot at weight 1)
#   config model "rows_per_gap" (9a7c19c): 0, every context row scored
#   panel.npz "centimorgans" (e001095): 1 cM per Mb
#   provenance "genetic_map" (8ba5258): None, trained without a map
#   any other config setting added since the first config.json: its default (in
#     genimpute.config, or the backbone's config class), as before formats
# The rest of provenance.json (version, command, fingerprint, parameters, steps,
# minutes, finished, history) every `train` has written: a format-1 directory without it is malformed.
# Format 2: the format field; every key above present, a missing one
# being a malformed directory. Otherwise the files of the last format-1
# directories, so one of those becomes format 2 by adding the field.
# Format 3: config "model" is the named backbone's own config (genimpute.models:
# "name" and the settings that backbone reads, every one present), where formats
# 1 and 2 stored one flat set of settings for every backbone (_FLAT_MODEL). Such a
# set reads as the backbone's config with the settings it does not read dropped,
# whatever their values: the model never read them, so its weights and outputs
# do not depend on them (a format-2 npssm holds the `heads` it was given, a match
# model SPIN's `kmer`, ...).
# Format 4: an axial backbone's config (msa, npssm) holds "evidence"
# and "body_rows"; one of formats 1 to 3 has neither and reads as the backbone
# alone (False and 0), as it was trained.
# Format 5: an axial backbone's config holds "local_columns" and
# "unsure", and spin's "evidence"; one of formats 1 to 4 has none of them and
# reads as it was trained: the axial layers reading the whole window
# (local_columns 0), spin without evidence.
# Format 6: panel.npz keeps a rare record as the list of its carriers
# (genimpute.io.sparse_rows; a compact panel's format genimpute-panel/2); one of
# formats 1 to 5 keeps every record whole ("packed"), and reads as before. A
# genimpute that reads formats up to 5 would take the new panel.npz for a
# corrupted one; it says instead that the directory is of a newer format.
# Format 7: panel.npz keeps a listed record's carriers as gaps and the rows of
# the others in blocks by their distinct columns (genimpute.io.delta_positions,
# genimpute.io.coded_rows; genimpute-panel/3); one of
# formats 1 to 6 reads as before, and for the same reason as format 6's a
# genimpute that reads up to 6 says the directory is newer.
#
# Retiring format 1 is deleting its branches here (and ReferencePanel.load's
# centimorgans_optional) and letting FIRST_FORMAT be 2.
FORMAT_NAME = "genimpute-model"
FIRST_FORMAT, FORMAT = 1, 7  # the oldest format read, and the one written

# config settings whose default changed when they were added: the rest take their config class's
_FORMAT1_CONFIG = {"window": {"near_weight": 1}, "model": {"rows_per_gap": 0}}
_FORMAT1_PROVENANCE = {"processes": 1, "initialised_from": None, "genetic_map": None}
_FORMAT1_CHECKPOINT = {"initialised_from": None}
# (format, backbones, settings): model settings a format added, valued as a directory of an earlier format was trained
_MODEL_ADDED = [
    (4, ("msa", "npssm"), {"evidence": False, "body_rows": 0}),
    (5, ("msa", "npssm"), {"local_columns": 0, "unsure": 0.01}),
    (5, ("spin",), {"evidence": False}),
]
# the model settings of a format-2 config, for every backbone alike
_FLAT_MODEL = ("name", "dim", "layers", "heads", "ffn_mult", "max_columns", "kmer", "latents", "inducing",
               "neighbours", "state", "rows_per_gap")


def format_tag(version: int) -> str:
    return f"{FORMAT_NAME}/{version}"


def parse_format(value, where: str | Path) -> int:
    """The format number of a "format" field's `value` (None: format 1)."""
    if value is None:
        return 1
    match = re.fullmatch(rf"{re.escape(FORMAT_NAME)}/(\d+)", value) if isinstance(value, str) else None
    if match is None or not FIRST_FORMAT <= int(match.group(1)) <= FORMAT:
        newer = match is not None and int(match.group(1)) > FORMAT
        raise ModelFormatError(
            f"{where}: expected a model of format {format_tag(FIRST_FORMAT)} to {format_tag(FORMAT)}; "
            f"found {value if isinstance(value, str) else repr(value)}"
            + (" (written by a newer genimpute: upgrade genimpute to read it)" if newer else ""))
    return int(match.group(1))


def upgrade_config(d: dict, version: int) -> dict:
    """A stored config's parts (window, model, train) in the current form,
    complete: a format-1 config's missing settings filled in, a later
    format's checked for all, and before format 3 the flat model settings
    made the named backbone's (see "Formats")."""
    from genimpute.models import settings_of

    model = d["model"] if version >= 3 else _backbone_settings(d["model"], version)
    for added_in, backbones, settings in _MODEL_ADDED:
        if version < added_in and model["name"] in backbones:
            model = {**model, **settings}
    parts = {"window": dataclasses.asdict(WindowConfig()), "train": dataclasses.asdict(TrainConfig())}
    if version == 1:
        upgraded = {part: {**settings, **_FORMAT1_CONFIG.get(part, {}), **d[part]} for part, settings in parts.items()}
        return {"window": upgraded["window"], "model": model, "train": upgraded["train"]}
    for part, settings in parts.items():
        _require(d[part], settings, f"config {part}")
    _require(model, ["name", *settings_of(model["name"])], "config model")
    return {"window": d["window"], "model": model, "train": d["train"]}


def _backbone_settings(flat: dict, version: int) -> dict:
    """A format-1 or 2 model dict as the named backbone's: the settings it
    reads, the rest dropped; a format-1 one lacking any gets its default."""
    from genimpute.models import model_config, settings_of

    if version == 1:
        flat = {**_FORMAT1_CONFIG["model"], **flat}
    else:
        _require(flat, _FLAT_MODEL, "config model")
    reads = settings_of(flat["name"])
    return model_config(flat["name"], **{k: flat[k] for k in reads if k in flat}).to_dict()


def read_config(d: dict, version: int) -> RunConfig:
    """The RunConfig a stored config of format `version` holds."""
    from genimpute.models import model_config

    d = upgrade_config(d, version)
    model = {k: v for k, v in d["model"].items() if k != "name"}
    return RunConfig(window=WindowConfig(**d["window"]), model=model_config(d["model"]["name"], **model),
                     train=TrainConfig(**d["train"]))


def _upgrade_provenance(d: dict, version: int) -> dict:
    if version > 1:
        return d
    d = {**_FORMAT1_PROVENANCE, **d}
    if "panels" not in d:  # from before several panels: the one panel's record at the top level
        d["panels"] = [{"panel": d.pop("panel"), "array": d.pop("array"), "samples": None, "records": None,
                        "typed_sites": d.pop("typed_sites"), "validation_samples": d.pop("validation_samples")}]
    return d


def _upgrade_checkpoint(d: dict, version: int) -> dict:
    return {**_FORMAT1_CHECKPOINT, **d} if version == 1 else d


def panel_may_lack_centimorgans(version: int) -> bool:
    return version == 1


def _require(d: dict, keys, what: str) -> None:
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{what}: expected {', '.join(missing)}; found none of them")


# --- Records ------------------------------------------------------------------
@dataclass(frozen=True)
class Validation:
    """One validation of a training run: held-out r2 after `step` steps."""

    step: int
    minutes: float
    query_loss: float | None  # the step's batch loss; None for the final validation of a run whose last step had none
    val_r2: float

    def to_json(self) -> dict:
        d = {"step": self.step, "minutes": self.minutes, "query_loss": self.query_loss, "val_r2": self.val_r2}
        if self.query_loss is None:
            del d["query_loss"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Validation":
        return cls(d["step"], d["minutes"], d.get("query_loss"), d["val_r2"])


@dataclass(frozen=True)
class PanelRecord:
    """A panel a model was trained on, with its array."""

    panel: str
    array: str
    samples: int | None  # None: a format-1 directory from before several panels did not record it
    records: int | None  # likewise
    typed_sites: int
    validation_samples: tuple[str, ...]

    def to_json(self) -> dict:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> "PanelRecord":
        _require(d, [f.name for f in fields(cls)], "panel record")
        return cls(**{f.name: d[f.name] for f in fields(cls)} | {"validation_samples": tuple(d["validation_samples"])})


@dataclass(frozen=True)
class Provenance:
    """provenance.json: how, from what and how far a model was trained."""

    genimpute_version: str
    command: str
    panels: tuple[PanelRecord, ...]
    panel_fingerprint: str
    genetic_map: str | None
    initialised_from: str | None  # the model directory whose weights the run started from (train --init)
    parameters: int
    processes: int
    steps: int
    minutes: float
    finished: bool
    history: tuple[Validation, ...]
    format: int = FORMAT  # of the directory read; a new record is written in FORMAT

    def to_json(self) -> dict:
        """The JSON object, keys in the order provenance.json always had, the format first."""
        d = {"format": format_tag(self.format)}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("panels", "history"):
                d[f.name] = [record.to_json() for record in value]
            elif f.name != "format":
                d[f.name] = value
        return d

    @classmethod
    def from_json(cls, d: dict, where: str | Path = PROVENANCE) -> "Provenance":
        version = parse_format(d.get("format"), where)  # before any other field
        d = _upgrade_provenance(d, version)
        _require(d, [f.name for f in fields(cls) if f.name != "format"], "provenance")
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name != "format"} | {
            "panels": tuple(PanelRecord.from_json(p) for p in d["panels"]),
            "history": tuple(Validation.from_json(v) for v in d["history"]), "format": version})

    # The JSON's keys, for scripts (and tests) that read provenance as a dict
    def __getitem__(self, key: str):
        return self.to_json()[key]

    def get(self, key: str, default=None):
        return self.to_json().get(key, default)


@dataclass(frozen=True)
class Checkpoint:
    """checkpoint.pt: a training run's state, for --resume."""

    model: dict  # the model's state dict
    optimizer: dict  # the optimizer's state dict
    step: int
    elapsed: float  # seconds trained, over every resumption
    history: tuple[Validation, ...]
    config: RunConfig
    panel_fingerprint: str  # of the panels trained on: a resumed run must see the same
    initialised_from: str | None
    format: int = FORMAT

    def to_state(self) -> dict:
        """The dict torch.save writes."""
        return {"format": format_tag(self.format), "model": self.model, "optimizer": self.optimizer,
                "step": self.step, "elapsed": self.elapsed, "history": [v.to_json() for v in self.history],
                "config": self.config.to_dict(), "panel_fingerprint": self.panel_fingerprint,
                "initialised_from": self.initialised_from}

    @classmethod
    def from_state(cls, state: dict, where: str | Path = CHECKPOINT) -> "Checkpoint":
        version = parse_format(state.get("format"), where)  # before any other field
        d = _upgrade_checkpoint(state, version)
        _require(d, [f.name for f in fields(cls) if f.name != "format"], "checkpoint")
        return cls(d["model"], d["optimizer"], d["step"], d["elapsed"],
                   tuple(Validation.from_json(v) for v in d["history"]),
                   read_config(d["config"], version), d["panel_fingerprint"],
                   d["initialised_from"], version)


# --- Files --------------------------------------------------------------------
def default_model_dir() -> Path:
    """$GENIMPUTE_MODEL, else $XDG_DATA_HOME/genimpute/model
    (~/.local/share/genimpute/model)."""
    if os.environ.get("GENIMPUTE_MODEL"):
        return Path(os.environ["GENIMPUTE_MODEL"])
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "genimpute" / "model"


def write_json(path: Path, obj: dict) -> None:
    write_whole(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=2) + "\n"))


def save_torch(path: Path, obj: dict) -> None:
    import torch

    write_whole(path, lambda tmp: torch.save(obj, tmp))


def load_torch(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # truncated or foreign files raise many kinds
        raise CheckpointError(f"{path}: cannot be loaded; truncated or not a genimpute file ({exc})") from exc


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    save_torch(path, checkpoint.to_state())


def read_checkpoint(path: Path) -> Checkpoint:
    state = load_torch(path)
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a genimpute checkpoint; found a {type(state).__name__}")
    try:
        return Checkpoint.from_state(state, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: malformed checkpoint ({exc})") from exc


def write_model_dir(out: Path, config: RunConfig, weights: dict, provenance: Provenance) -> None:
    """config.json, model.pt (the state dict `weights`) and provenance.json,
    last: a directory with a provenance.json is whole."""
    write_json(out / CONFIG, config.to_dict())
    save_torch(out / WEIGHTS, {"model": weights})
    write_json(out / PROVENANCE, provenance.to_json())


@dataclass
class LoadedModel:
    model: torch.nn.Module
    config: RunConfig
    panel: ReferencePanel
    provenance: Provenance


def read_settings(directory: str | Path) -> tuple[RunConfig, Provenance]:
    """The settings and provenance of the model in `directory`; its format
    is checked first, before anything else is read."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: no model directory; expected the output of `genimpute train` "
            "(pass --model, or train with no --out to use the default location)"
        )
    try:
        stored = json.loads((directory / PROVENANCE).read_text())
        if not isinstance(stored, dict):
            raise ValueError(f"expected a JSON object; found {type(stored).__name__}")
        provenance = Provenance.from_json(stored, directory / PROVENANCE)
        config = read_config(json.loads((directory / CONFIG).read_text()), provenance.format)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{directory}: config.json or provenance.json missing or malformed ({exc})") from exc
    return config, provenance


def load_weights(directory: str | Path) -> tuple[torch.nn.Module, RunConfig, Provenance]:
    """The model in `directory` (in eval mode), its settings and provenance."""
    from genimpute.models import build_model

    directory = Path(directory)
    config, provenance = read_settings(directory)
    model = build_model(config.model)
    state = load_torch(directory / WEIGHTS)
    try:
        model.load_state_dict(state["model"])
    except (KeyError, RuntimeError, TypeError) as exc:
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
        panel = ReferencePanel.load(directory / PANEL,
                                    centimorgans_optional=panel_may_lack_centimorgans(provenance.format))
        if panel.fingerprint() != provenance.panel_fingerprint:
            raise CheckpointError(f"{directory}: panel.npz does not match the panel the model was trained with")
    return LoadedModel(model, config, panel, provenance)
