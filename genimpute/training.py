"""Meta-learning across the whole panel.

Each step draws one window at a random place on a panel and a batch of its
training haplotypes as queries; the backbone's context family
(genimpute.batches) builds what the step shows it. The loss mixes the
queries' untyped cells (what imputation needs) with the reconstruction of
hidden context cells, moving linearly towards the query term; a backbone
that does not reconstruct (match) is scored on the queries alone. Held-out
panel samples give the validation r2 (genimpute.heldout).

Batches depend only on (seed, step), so a resumed run draws the same batches
as an uninterrupted one.
"""

from __future__ import annotations

import logging
import math
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from genimpute import __version__, modeldir
from genimpute.batches import NearestContext, NearestContextBatch, SharedContext, SharedContextBatch, batch_family
from genimpute.config import RunConfig, TrainConfig
from genimpute.distributed import SINGLE, Distributed
from genimpute.errors import InputError
from genimpute.heldout import Validator
from genimpute.io.scratch import write_whole
from genimpute.models import backbone
from genimpute.run_state import RunState, checkpoint_to_resume, initial_weights, start_run
from genimpute.training_set import TrainingSet, array_per_panel, panels_fingerprint, training_panels

log = logging.getLogger(__name__)


def lam_at(step: int, cfg: TrainConfig) -> float:
    """The query term's weight in the loss, lam_start rising linearly to 1 over anneal_steps."""
    return min(1.0, cfg.lam_start + (1 - cfg.lam_start) * step / max(1, cfg.anneal_steps))


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


class _StopRequest:
    """Turns SIGTERM into a clean stop at the end of the current step."""

    def __init__(self):
        self.requested = False

    def __enter__(self):
        self.previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, *_):
        self.requested = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self.previous)


def train(
    ref: str | Path | list,
    array: str | Path | list,
    out: str | Path,
    config: RunConfig,
    device: torch.device,
    resume: bool = False,
    progress: bool = True,
    dist: Distributed = SINGLE,
    init: str | Path | None = None,
    genetic_map: str | Path | None = None,
) -> dict:
    """Train a backbone and write a model directory to `out`. Returns the
    provenance record (steps, elapsed time, final validation r2).
    `ref` may be several panels (and `array` one array for all, or one per
    panel): each step draws its window from one of them, in proportion to
    their untyped records. A model trained on several panels has no panel of
    its own and imputes with `impute --ref`.
    `init`: a model directory whose weights (and so backbone and model size)
    the run starts from, e.g. the pretrained model, instead of random ones.
    `genetic_map`: a PLINK or shapeit4 map covering the panels' contigs
    (default 1 cM per Mb); a model with a panel of its own keeps its cM.
    Under torchrun, `dist` shares each batch among the processes (see
    genimpute.distributed); only its main process writes."""
    out = Path(out)
    init_model, config = initial_weights(init, resume, config)
    _check_family_settings(config)
    refs, arrays, panels = _read_panels(ref, array, genetic_map, out)
    fingerprint = panels_fingerprint(panels)
    checkpoint, config = checkpoint_to_resume(out, resume, fingerprint, refs, config)
    _prepare_out(out, panels, dist)
    _check_batch_size(config, dist)
    run = start_run(config, device, fingerprint, init, init_model, checkpoint)
    sets = [TrainingSet(panel, typed_mask, config.train.val_fraction, config.train.seed) for panel, typed_mask in panels]
    validator = Validator(sets, config) if dist.is_main else None
    log.info("model %s: %d parameters; %d train / %d validation haplotypes", config.model.name,
             _parameter_count(run.model), sum(len(ts.train_haps) for ts in sets), sum(len(ts.val_haps) for ts in sets))
    _train_steps(run, sets, validator, out / modeldir.CHECKPOINT, device, dist, progress)
    if not dist.is_main:
        return {"steps": run.step, "minutes": round(run.elapsed / 60, 2), "finished": run.finished(),
                "history": [v.to_json() for v in run.history]}
    panel_records = [ts.provenance(r, a) for r, a, ts in zip(refs, arrays, sets)]
    return _write_model_dir(out, run, validator, device, panel_records, genetic_map, dist)


def _check_family_settings(config: RunConfig) -> None:
    """Refuse settings the backbone's context family does not read."""
    batch_family(backbone(config.model.name).model).check_settings(config)


def _read_panels(ref: str | Path | list, array: str | Path | list, genetic_map: str | Path | None,
                 out: Path) -> tuple[list, list, list]:
    """(panel paths, array paths, one per panel, [(panel, typed mask)]);
    a VCF panel's records spooled beside `out` (in its nearest directory
    that exists: `out` is made once the inputs are checked)."""
    refs, arrays = ([p] if isinstance(p, (str, Path)) else list(p) for p in (ref, array))
    arrays = array_per_panel(refs, arrays)
    spool_dir = next(d for d in out.absolute().parents if d.is_dir())
    return refs, arrays, training_panels(refs, arrays, genetic_map, spool_dir)


def _prepare_out(out: Path, panels: list, dist: Distributed) -> None:
    """Create `out`, holding the panel when there is one."""
    dist.barrier()  # every process has checked --out before the main one writes to it
    if dist.is_main:
        out.mkdir(parents=True, exist_ok=True)
        if len(panels) == 1:
            write_whole(out / modeldir.PANEL, panels[0][0].save)


def _check_batch_size(config: RunConfig, dist: Distributed) -> None:
    if config.train.batch_size < dist.world:
        raise InputError(f"--batch-size: expected at least one query per process ({dist.world}); "
                         f"found {config.train.batch_size}")


def _parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _train_steps(run: RunState, sets: list[TrainingSet], validator: Validator | None, checkpoint_path: Path,
                 device: torch.device, dist: Distributed, progress: bool) -> None:
    """Step until the step or time budget is spent or SIGTERM asks to stop,
    validating and checkpointing on the way."""
    cfg = run.config.train
    family = batch_family(run.model)
    set_weights = np.array([ts.n_untyped for ts in sets], float)
    set_weights /= set_weights.sum()
    bar = tqdm(total=cfg.steps, initial=run.step, desc="train", unit="step", disable=not (progress and dist.is_main),
               file=sys.stderr)
    net = dist.wrap(run.model, device)
    run.model.train()
    started = time.monotonic() - run.elapsed
    with _StopRequest() as stop:
        # every process stops at the same step, whichever one's clock or signal says so
        while not dist.any(run.finished() or stop.requested):
            batch = _draw_batch(run, sets, set_weights, family)
            query_sum, n_query, lam = _optimise(run, batch, net, device, dist)
            run.step += 1
            run.elapsed = time.monotonic() - started
            bar.update(1)
            bar.set_postfix(loss=f"{query_sum.item() / n_query:.4f}", lam=f"{lam:.2f}")  # this process's share
            if run.step % cfg.validate_every == 0 or run.step == cfg.steps:
                batch_loss = dist.total(query_sum.item()) / n_query  # collective: every process takes part
                if dist.is_main:
                    _validate(run, validator, device, batch_loss, bar)
            if run.step % cfg.checkpoint_every == 0 and dist.is_main:
                modeldir.save_checkpoint(checkpoint_path, run.snapshot())
    bar.close()


def _draw_batch(run: RunState, sets: list[TrainingSet], set_weights: np.ndarray,
                family: NearestContext | SharedContext) -> NearestContextBatch | SharedContextBatch:
    """The step's batch: a random window of a panel drawn by `set_weights`
    (its share of untyped records), and random training haplotypes as queries."""
    cfg, wcfg = run.config.train, run.config.window
    rng = np.random.default_rng([cfg.seed, run.step])
    # one panel draws nothing here, so its batches stay those of runs (and checkpoints) before several panels
    ts = sets[rng.choice(len(sets), p=set_weights)] if len(sets) > 1 else sets[0]
    window = ts.random_window(rng, wcfg.untyped, wcfg.typed, cfg.min_array_density)
    queries = rng.choice(ts.train_haps, size=min(cfg.batch_size, len(ts.train_haps)), replace=False)
    return family.training_batch(ts, window, queries, rng, run.config)


def _optimise(run: RunState, batch: NearestContextBatch | SharedContextBatch, net: torch.nn.Module,
              device: torch.device, dist: Distributed) -> tuple[torch.Tensor, int, float]:
    """One optimiser step on this process's share of `batch`. Returns the
    share's summed query loss, the batch's query cells and the query term's weight."""
    cfg = run.config.train
    n_query, n_masked = batch.counts()
    query_sum, recon_sum = batch.share(dist.rows()).to(device).loss_sums(net)
    lam = lam_at(run.step, cfg) if run.model.reconstructs_context else 1.0
    # the batch means, as shares of this process; DDP averages gradients over processes, hence x world
    loss = dist.world * (lam * query_sum / n_query + (1 - lam) * recon_sum / max(1, n_masked))
    for group in run.optimizer.param_groups:
        group["lr"] = lr_at(run.step, cfg)
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), 1.0)
    run.optimizer.step()
    return query_sum, n_query, lam


def _validate(run: RunState, validator: Validator, device: torch.device, batch_loss: float, bar: tqdm) -> None:
    r2 = validator.r2(run.model, device)
    run.history.append(modeldir.Validation(run.step, round(run.elapsed / 60, 2), query_loss=batch_loss, val_r2=r2))
    log.info("step %d: query loss %.4f, validation r2 %.4f", run.step, batch_loss, r2)
    bar.set_postfix(loss=f"{batch_loss:.4f}", val_r2=f"{r2:.4f}")


def _write_model_dir(out: Path, run: RunState, validator: Validator, device: torch.device,
                     panels: list[modeldir.PanelRecord], genetic_map: str | Path | None, dist: Distributed) -> dict:
    """Validate the final weights unless the last step did, write the
    checkpoint and the model directory; returns the provenance record, as
    provenance.json holds it."""
    if not run.history or run.history[-1].step != run.step:
        # no batch loss: only validating steps sum theirs over the processes
        run.history.append(modeldir.Validation(run.step, round(run.elapsed / 60, 2), query_loss=None,
                                               val_r2=validator.r2(run.model, device)))
    modeldir.save_checkpoint(out / modeldir.CHECKPOINT, run.snapshot())
    provenance = modeldir.Provenance(
        genimpute_version=__version__, command=" ".join(sys.argv), panels=tuple(panels),
        panel_fingerprint=run.fingerprint, genetic_map=None if genetic_map is None else str(genetic_map),
        initialised_from=run.initialised_from, parameters=_parameter_count(run.model), processes=dist.world,
        steps=run.step, minutes=round(run.elapsed / 60, 2), finished=run.finished(), history=tuple(run.history),
    )
    modeldir.write_model_dir(out, run.config, run.model.state_dict(), provenance)
    if not run.finished():
        log.warning("stopped at step %d of %d; `genimpute train --resume` continues", run.step, run.config.train.steps)
    return provenance.to_json()
