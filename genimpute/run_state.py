"""A training run's state (model, optimizer, progress) as its checkpoint
holds it, and where a run starts from: seeded random weights, another
model directory's (train --init), or its own checkpoint (train --resume)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from genimpute import modeldir
from genimpute.config import RunConfig
from genimpute.errors import CheckpointError, InputError
from genimpute.models import build_model

log = logging.getLogger(__name__)


@dataclass
class RunState:
    """What a checkpoint holds."""

    config: RunConfig
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    fingerprint: str  # of the panels trained on: a resumed run must see the same
    initialised_from: str | None
    step: int = 0
    elapsed: float = 0.0  # seconds trained, over every resumption
    history: list[modeldir.Validation] = field(default_factory=list)

    def finished(self) -> bool:
        cfg = self.config.train
        return self.step >= cfg.steps or self.elapsed >= cfg.max_minutes * 60

    def snapshot(self) -> modeldir.Checkpoint:
        return modeldir.Checkpoint(
            model=self.model.state_dict(), optimizer=self.optimizer.state_dict(), step=self.step,
            elapsed=self.elapsed, history=tuple(self.history), config=self.config,
            panel_fingerprint=self.fingerprint, initialised_from=self.initialised_from,
        )


def initial_weights(init: str | Path | None, resume: bool,
                    config: RunConfig) -> tuple[torch.nn.Module | None, RunConfig]:
    """`init`'s model and the config taking its backbone and size; none when
    resuming, as a resumed run has its weights and settings in its checkpoint."""
    if init is None or resume:
        return None, config
    model, init_config, init_provenance = modeldir.load_weights(init)
    config = replace(config, model=init_config.model)
    log.info("starting from the weights of %s (%s, %s steps)", init, config.model.name, init_provenance.steps)
    return model, config


def checkpoint_to_resume(out: Path, resume: bool, fingerprint: str, refs: list,
                         config: RunConfig) -> tuple[modeldir.Checkpoint | None, RunConfig]:
    """The checkpoint in `out` and the settings it was trained with, the
    budget extended as asked; without `resume`, none, and `out` must hold no model."""
    checkpoint_path = out / modeldir.CHECKPOINT
    if not resume:
        if (out / modeldir.WEIGHTS).exists() or checkpoint_path.exists():
            raise InputError(f"{out}: already holds a model; pass --resume to continue it or choose another --out")
        return None, config
    checkpoint = modeldir.read_checkpoint(checkpoint_path)
    if checkpoint.panel_fingerprint != fingerprint:
        raise CheckpointError(f"{checkpoint_path}: was trained on other panels than {', '.join(map(str, refs))}")
    stored = checkpoint.config
    # a resumed run keeps its settings; only the budget may be extended
    budget = replace(stored.train, steps=config.train.steps, max_minutes=config.train.max_minutes)
    return checkpoint, replace(stored, train=budget)


def pretrained_matcher() -> torch.nn.Module:
    """The shipped pretrained match model, whose weights an axial backbone's evidence starts from."""
    model, config, _ = modeldir.load_weights(modeldir.PRETRAINED_DIR)
    if config.model.name != "match":
        raise CheckpointError(f"{modeldir.PRETRAINED_DIR}: expected a match model for the copying evidence; "
                              f"found {config.model.name}")
    return model


def start_run(config: RunConfig, device: torch.device, fingerprint: str, init: str | Path | None,
              init_model: torch.nn.Module | None, checkpoint: modeldir.Checkpoint | None) -> RunState:
    """The model and optimizer, with seeded random weights, `init_model`'s, or the checkpoint's."""
    cfg = config.train
    torch.manual_seed(cfg.seed)
    model = build_model(config.model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    run = RunState(config, model, optimizer, fingerprint, None if init is None else str(init))
    if init_model is not None:
        model.load_state_dict(init_model.state_dict())
    elif checkpoint is None and getattr(model, "evidence", None) is not None:
        try:
            model.evidence.matcher.load_state_dict(pretrained_matcher().state_dict())
        except RuntimeError as exc:
            raise CheckpointError(f"{modeldir.PRETRAINED_DIR}: its match model does not fit the copying evidence's "
                                  f"({exc})") from exc
        log.info("the copying evidence starts from the pretrained match model (%s)", modeldir.PRETRAINED_DIR)
    if checkpoint is not None:
        model.load_state_dict(checkpoint.model)
        optimizer.load_state_dict(checkpoint.optimizer)
        run.step, run.elapsed, run.history = checkpoint.step, checkpoint.elapsed, list(checkpoint.history)
        run.initialised_from = checkpoint.initialised_from
        log.info("resuming at step %d (%.1f min trained)", run.step, run.elapsed / 60)
    return run
