"""Meta-learning across the whole panel.

Each step draws one window at a random place on the panel and a batch of
panel haplotypes as queries. A query sees only its typed alleles; its context
is the k haplotypes nearest to it on the window's typed sites, drawn from
training samples other than its own. The loss mixes the query's untyped
cells (what imputation needs) with reconstruction of span-masked context
cells, moving linearly towards the query term; a backbone that does not
reconstruct (match) is scored on the query alone. A held-out set of panel
samples gives the validation r2.

Shared-context backbones (SPIN) see instead one context per step, the
window's training haplotypes less the queries' samples; the untyped cells of
a share of them are hidden and predicted with the queries.

Batches depend only on (seed, step), so a resumed run draws the same batches
as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import logging
import math
import signal
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from genimpute import __version__, modeldir
from genimpute.config import MASKED, RunConfig
from genimpute.distributed import SINGLE, Distributed
from genimpute.errors import CheckpointError, InputError
from genimpute.io.array_list import read_array_list
from genimpute.models import REGISTRY, build_model
from genimpute.models.kmers import allele_classes, groups_of
from genimpute.panel import ReferencePanel, array_typed_mask, read_reference
from genimpute.predict import window_centimorgans, window_probabilities
from genimpute.windows import (
    Window,
    assemble_rows,
    block_site_weights,
    contig_rows,
    nearest_haplotypes,
    query_rows,
    window_for_block,
)

log = logging.getLogger(__name__)


class _Tensors:
    """A batch's tensors: moved together, and sliced together to a share of
    the rows that are predicted (for one process of a distributed run)."""

    _whole = ("typed", "genetic", "weights")  # fields shared by every row, never sliced

    def to(self, device: torch.device):
        return type(self)(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def share(self, part: slice):
        return type(self)(**{f.name: getattr(self, f.name) if f.name in self._whole else getattr(self, f.name)[part]
                             for f in fields(self)})


@dataclass
class Batch(_Tensors):
    """Nearest-context backbones: each query with its own context rows."""

    tokens: torch.Tensor  # (B, R, M) long, model input
    typed: torch.Tensor  # (M,) bool
    genetic: torch.Tensor  # (M,) float, cM of the columns (predict.window_centimorgans)
    alleles: torch.Tensor  # (B, R, M) float, true alleles
    query_cells: torch.Tensor  # (B, R, M) bool, the query's untyped cells
    masked_cells: torch.Tensor  # (B, R, M) bool, hidden context cells
    weights: torch.Tensor  # (M,) float, weight of each column's query cells

    def counts(self) -> tuple[int, int]:
        return int(self.query_cells.sum()), int(self.masked_cells.sum())

    def loss_sums(self, net: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """(weighted query cross-entropy, context reconstruction) summed over
        their cells; sums, so that shares of a batch on several processes add up."""
        logits = net(self.tokens, self.typed, self.genetic)
        bce = F.binary_cross_entropy_with_logits(logits, self.alleles, reduction="none")
        return (bce * self.weights)[self.query_cells].sum(), bce[self.masked_cells].sum()


@dataclass
class SharedBatch(_Tensors):
    """Shared-context backbones: one context for all queries, the window's
    training haplotypes less the queries' samples. Some context rows have
    their untyped cells hidden and are predicted with the queries. With a
    neighbour reader, each predicted row also names its nearest context rows."""

    _whole = ("context", "typed", "target_groups")

    context: torch.Tensor  # (R, M) long
    predicted: torch.Tensor  # (N, M) long, rows to predict: the queries, then the hidden context rows
    typed: torch.Tensor  # (M,) bool
    alleles: torch.Tensor  # (N, M) long, their true alleles
    is_query: torch.Tensor  # (N,) bool
    target_groups: torch.Tensor  # (Gt, K) untyped columns of each K-mer target token
    neighbours: torch.Tensor  # (N, n) long, each predicted row's nearest context rows (n = 0: not read)

    def counts(self) -> tuple[int, int]:
        n_query = int(self.is_query.sum())
        return n_query * len(self.target_groups), (len(self.is_query) - n_query) * len(self.target_groups)

    def loss_sums(self, net: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        neighbours = self.neighbours if self.neighbours.shape[1] else None
        logits = net(self.context, self.predicted, self.typed, neighbours)  # (N, Gt, 2^K)
        classes = allele_classes(self.alleles, self.target_groups)  # (N, Gt)
        ce = F.cross_entropy(logits.transpose(1, 2), classes, reduction="none").sum(1)
        return ce[self.is_query].sum(), ce[~self.is_query].sum()


class TrainingSet:
    """The panel, its typed sites, and the split of samples into train/val."""

    def __init__(self, panel: ReferencePanel, typed_mask: np.ndarray, val_fraction: float, seed: int):
        self.panel, self.typed_mask = panel, typed_mask
        n_samples = len(panel.samples)
        n_val = int(round(val_fraction * n_samples))
        if n_samples - n_val < 3:
            raise InputError(f"panel: expected at least 3 training samples; found {n_samples - n_val}")
        val_samples = np.random.default_rng([seed, 7]).choice(n_samples, n_val, replace=False)
        self.is_val = np.zeros(panel.n_haplotypes, bool)
        self.is_val[2 * val_samples] = self.is_val[2 * val_samples + 1] = True
        self.train_haps = np.nonzero(~self.is_val)[0]
        self.val_haps = np.nonzero(self.is_val)[0]
        self.contigs = []  # (contig, untyped rows, typed rows) with something to predict
        for c in range(len(panel.contig_names)):
            untyped, typed = contig_rows(panel.contig_index, c, typed_mask)
            if len(untyped) and len(typed):
                self.contigs.append((c, untyped, typed))
        if not self.contigs:
            raise InputError("panel: expected untyped and typed records on one contig; found none")
        weights = np.array([len(u) for _, u, _ in self.contigs], float)
        self.contig_weights = weights / weights.sum()

    @property
    def n_untyped(self) -> int:
        return sum(len(u) for _, u, _ in self.contigs)

    def random_window(self, rng: np.random.Generator, n_untyped: int, n_typed: int,
                      min_density: float = 1.0) -> Window:
        """A window at a random place. With min_density < 1, only a random
        share in [min_density, 1] of the array's sites stay typed and the rest
        are imputed, as with a sparser array."""
        c, untyped, typed = self.contigs[rng.choice(len(self.contigs), p=self.contig_weights)]
        if min_density < 1:
            keep = rng.random(len(typed)) < rng.uniform(min_density, 1)
            keep[rng.integers(len(typed))] = True
            untyped, typed = np.union1d(untyped, typed[~keep]), typed[keep]
        start = rng.integers(0, max(1, len(untyped) - n_untyped + 1))
        return window_for_block(untyped[start: start + n_untyped], typed, self.panel.positions, n_typed, c)

    def maf_weights(self, window: Window, haps: np.ndarray, exponent: float) -> np.ndarray:
        """(M,) float32: 1 at typed columns; MAF^-exponent at untyped ones,
        MAF among training haplotypes (at least one haplotype's share), scaled to mean 1."""
        weights = np.ones(len(window.typed), np.float32)
        if exponent:
            alt = haps[~window.typed][:, self.train_haps].mean(axis=1)
            maf = np.maximum(np.minimum(alt, 1 - alt), 1 / len(self.train_haps))
            untyped = maf ** -exponent
            weights[~window.typed] = untyped / untyped.mean()
        return weights

    def batch(self, window: Window, queries: np.ndarray, k: int, rng, mask_rate: float, mask_span: int,
              missing_rate: float = 0.0, maf_weight: float = 0.0, site_weights: np.ndarray | None = None) -> Batch:
        """site_weights: (t,) each typed site's count in the nearest-haplotype distance (default 1)."""
        haps = self.panel.haplotypes(window.columns)  # (M, H)
        typed_haps = haps[window.typed].T  # (H, t)
        query_alleles = haps.T[queries]  # (B, M)
        # some typed cells of the query are hidden, as missing calls are at imputation
        missing = (rng.random(query_alleles.shape) < missing_rate) & window.typed
        seen = np.where(missing, -1, query_alleles.astype(np.int8))
        # a query never sees its own sample nor validation samples
        exclude = np.broadcast_to(self.is_val, (len(queries), len(self.is_val))).copy()
        rows = np.arange(len(queries))
        exclude[rows, queries] = exclude[rows, queries ^ 1] = True
        k = min(k, len(self.train_haps) - 2)
        context = nearest_haplotypes(seen[:, window.typed], typed_haps, k, exclude, site_weights)
        tokens = assemble_rows(haps, seen, context, window.typed)
        # the context rows' alleles are their tokens, before any are masked below
        alleles = np.concatenate([query_alleles[:, None], tokens[:, 1:]], axis=1)
        masked = span_mask(rng, tokens.shape, mask_rate, mask_span)
        masked[:, 0] = False
        tokens[masked] = MASKED
        query_cells = np.zeros(tokens.shape, bool)
        query_cells[:, 0] = ~window.typed | missing
        return Batch(
            tokens=torch.from_numpy(tokens),
            typed=torch.from_numpy(window.typed),
            genetic=window_centimorgans(self.panel.centimorgans[window.columns]),
            alleles=torch.from_numpy(alleles.astype(np.float32)),
            query_cells=torch.from_numpy(query_cells),
            masked_cells=torch.from_numpy(masked),
            weights=torch.from_numpy(self.maf_weights(window, haps, maf_weight)),
        )


    def shared_batch(self, window: Window, queries: np.ndarray, kmer: int, rng, mask_rate: float,
                     missing_rate: float = 0.0, neighbours: int = 0) -> SharedBatch:
        haps = self.panel.haplotypes(window.columns)  # (M, H)
        query_alleles = haps.T[queries]  # (B, M)
        missing = (rng.random(query_alleles.shape) < missing_rate) & window.typed
        seen = np.where(missing, -1, query_alleles.astype(np.int8))
        # the context: training haplotypes, less the queries' own samples
        in_context = ~self.is_val
        in_context[queries] = in_context[queries ^ 1] = False
        context_haps = np.nonzero(in_context)[0]  # panel haplotype of each context row
        context_alleles = haps.T[context_haps].astype(np.int64)  # (R, M)
        context = context_alleles.copy()
        hidden = np.nonzero(rng.random(len(context)) < mask_rate)[0]  # datapoints whose labels are hidden
        context[np.ix_(hidden, np.nonzero(~window.typed)[0])] = MASKED
        typed = torch.from_numpy(window.typed)
        nearest = np.empty((len(queries) + len(hidden), 0), np.int64)
        if neighbours:
            # a hidden row reads neither itself nor its sample's other haplotype, as a query its own sample
            exclude = np.zeros((len(nearest), len(context)), bool)
            own_sample = (context_haps[None, :] // 2) == (context_haps[hidden, None] // 2)  # (hidden, R)
            exclude[len(queries):] = own_sample
            predicted_typed = np.concatenate([seen, context_alleles[hidden]])[:, window.typed]
            nearest = nearest_haplotypes(predicted_typed, context_alleles[:, window.typed],
                                         min(neighbours, len(context) - 2), exclude)
        return SharedBatch(
            context=torch.from_numpy(context),
            predicted=torch.from_numpy(np.concatenate([query_rows(seen, window.typed), context[hidden]])),
            typed=typed,
            alleles=torch.from_numpy(np.concatenate([query_alleles.astype(np.int64), context_alleles[hidden]])),
            is_query=torch.from_numpy(np.arange(len(queries) + len(hidden)) < len(queries)),
            target_groups=groups_of(~typed, kmer),
            neighbours=torch.from_numpy(nearest),
        )


def span_mask(rng: np.random.Generator, shape: tuple, rate: float, span: int) -> np.ndarray:
    """Bool mask hiding about `rate` of the cells, in runs of `span` columns."""
    starts = rng.random(shape) < rate / span
    mask = starts.copy()
    for shift in range(1, span):
        mask[..., shift:] |= starts[..., :-shift]
    return mask


def lam_at(step: int, cfg) -> float:
    return min(1.0, cfg.lam_start + (1 - cfg.lam_start) * step / max(1, cfg.anneal_steps))


def lr_at(step: int, cfg) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def pooled_r2(prob: np.ndarray, truth: np.ndarray) -> float:
    """Squared Pearson correlation over all cells; nan when either is constant."""
    prob, truth = prob.ravel().astype(np.float64), truth.ravel().astype(np.float64)
    if prob.std() == 0 or truth.std() == 0:
        return float("nan")
    return float(np.corrcoef(prob, truth)[0, 1] ** 2)


class Validator:
    """Fixed held-out windows and queries; r2 of P(alt) on untyped cells,
    computed as imputation computes it, the validation samples out of every
    context."""

    def __init__(self, sets: list[TrainingSet], cfg: RunConfig):
        rng = np.random.default_rng([cfg.train.seed, 11])
        self.window_config = cfg.window
        self.cases = []
        with_val = [ts for ts in sets if len(ts.val_haps)]
        for i in range(cfg.train.val_windows if with_val else 0):
            ts = with_val[i % len(with_val)]  # the windows taken in turn from each panel
            queries = ts.val_haps[: min(len(ts.val_haps), 32)]
            exclude = np.broadcast_to(ts.is_val, (len(queries), len(ts.is_val)))
            window = ts.random_window(rng, cfg.window.untyped, cfg.window.typed)
            haps = ts.panel.haplotypes(window.columns)  # (M, H)
            self.cases.append((window, haps, haps[window.typed][:, queries].T, ts.panel.centimorgans[window.columns],
                               haps[~window.typed][:, queries], exclude))

    @torch.no_grad()
    def r2(self, model: torch.nn.Module, device: torch.device) -> float:
        if not self.cases:
            return float("nan")
        model.eval()
        probs = [window_probabilities(model, window, haps, query_typed, genetic, self.window_config, device, exclude)
                 for window, haps, query_typed, genetic, _, exclude in self.cases]
        model.train()
        return pooled_r2(np.concatenate(probs, axis=None), np.concatenate([c[4] for c in self.cases], axis=None))


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


def _array_per_panel(refs: list, arrays: list) -> list:
    """One array for every panel, or one per panel."""
    if len(arrays) not in (1, len(refs)):
        raise InputError(f"--array: expected one array for every panel or one per --ref ({len(refs)}); found {len(arrays)}")
    return arrays * len(refs) if len(arrays) == 1 else arrays


def _training_panels(refs: list, arrays: list,
                     genetic_map: str | Path | None) -> list[tuple[ReferencePanel, np.ndarray]]:
    """Each panel, with the map's genetic positions if given, and its typed mask."""
    panels = []
    for ref, array in zip(refs, arrays):
        panel = read_reference(ref)
        if genetic_map is not None:
            panel = panel.with_genetic_map(genetic_map)
        typed_mask = array_typed_mask(panel, read_array_list(array))
        log.info("panel %s: %d samples, %d records, %d typed by %s", ref, len(panel.samples), len(panel),
                 typed_mask.sum(), array)
        panels.append((panel, typed_mask))
    return panels


def _fingerprint(panels: list[tuple[ReferencePanel, np.ndarray]]) -> str:
    """The panel's fingerprint; for several, one over theirs in order."""
    prints = [panel.fingerprint() for panel, _ in panels]  # hashes every haplotype: computed once
    return prints[0] if len(prints) == 1 else hashlib.sha256(" ".join(prints).encode()).hexdigest()


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
    start = None
    if init is not None and not resume:  # a resumed run has its weights and settings in its checkpoint
        start, init_config, init_provenance = modeldir.load_weights(init)
        config = replace(config, model=init_config.model)
        log.info("starting from the weights of %s (%s, %s steps)", init, config.model.name, init_provenance.get("steps"))
    backbone = REGISTRY.get(config.model.name)  # an unknown name is build_model's error, below
    if config.train.maf_weight and backbone is not None and backbone.shares_context:
        raise InputError(f"--maf-weight: expected a nearest-context backbone (match, msa, npssm); found {config.model.name}")
    refs, arrays = ([p] if isinstance(p, (str, Path)) else list(p) for p in (ref, array))
    arrays = _array_per_panel(refs, arrays)
    panels = _training_panels(refs, arrays, genetic_map)
    fingerprint = _fingerprint(panels)
    checkpoint_path = out / modeldir.CHECKPOINT
    state = None
    if resume:
        state = modeldir.load_torch(checkpoint_path)
        if state.get("panel_fingerprint") != fingerprint:
            raise CheckpointError(f"{checkpoint_path}: was trained on other panels than {', '.join(map(str, refs))}")
        stored = RunConfig.from_dict(state["config"])
        # a resumed run keeps its settings; only the budget may be extended
        config = replace(stored, train=replace(stored.train, steps=config.train.steps, max_minutes=config.train.max_minutes))
    elif (out / modeldir.WEIGHTS).exists() or checkpoint_path.exists():
        raise InputError(f"{out}: already holds a model; pass --resume to continue it or choose another --out")
    dist.barrier()  # every process has checked --out before the main one writes to it
    if dist.is_main:
        out.mkdir(parents=True, exist_ok=True)
        if len(panels) == 1:
            modeldir.atomic_write(out / modeldir.PANEL, panels[0][0].save)

    cfg = config.train
    if cfg.batch_size < dist.world:
        raise InputError(f"--batch-size: expected at least one query per process ({dist.world}); found {cfg.batch_size}")
    torch.manual_seed(cfg.seed)
    model = build_model(config.model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    step, elapsed, history = 0, 0.0, []
    initialised_from = None if init is None else str(init)
    if start is not None:
        model.load_state_dict(start.state_dict())
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, elapsed, history = state["step"], state["elapsed"], state["history"]
        initialised_from = state.get("initialised_from")
        log.info("resuming at step %d (%.1f min trained)", step, elapsed / 60)

    sets = [TrainingSet(panel, typed_mask, cfg.val_fraction, cfg.seed) for panel, typed_mask in panels]
    set_weights = np.array([ts.n_untyped for ts in sets], float)
    set_weights /= set_weights.sum()
    validator = Validator(sets, config) if dist.is_main else None
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model %s: %d parameters; %d train / %d validation haplotypes", config.model.name, n_params,
             sum(len(ts.train_haps) for ts in sets), sum(len(ts.val_haps) for ts in sets))

    def snapshot():
        return {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
            "elapsed": elapsed, "history": history, "config": config.to_dict(),
            "panel_fingerprint": fingerprint, "initialised_from": initialised_from,
        }

    w = config.window
    bar = tqdm(total=cfg.steps, initial=step, desc="train", unit="step", disable=not (progress and dist.is_main), file=sys.stderr)
    net = dist.wrap(model, device)
    model.train()
    started = time.monotonic() - elapsed
    with _StopRequest() as stop:
        # every process stops at the same step, whichever one's clock or signal says so
        while not dist.any(step >= cfg.steps or elapsed >= cfg.max_minutes * 60 or stop.requested):
            rng = np.random.default_rng([cfg.seed, step])
            # one panel draws nothing here, so its batches stay those of runs (and checkpoints) before several panels
            ts = sets[rng.choice(len(sets), p=set_weights)] if len(sets) > 1 else sets[0]
            window = ts.random_window(rng, w.untyped, w.typed, cfg.min_array_density)
            queries = rng.choice(ts.train_haps, size=min(cfg.batch_size, len(ts.train_haps)), replace=False)
            if model.shares_context:
                full = ts.shared_batch(window, queries, config.model.kmer, rng, cfg.mask_rate, cfg.query_missing_rate,
                                       config.model.neighbours)
            else:
                full = ts.batch(window, queries, w.context, rng, cfg.mask_rate if model.reconstructs_context else 0.0,
                                cfg.mask_span, cfg.query_missing_rate, cfg.maf_weight,
                                block_site_weights(window.typed, w.near_sites, w.near_weight))
            n_query, n_masked = full.counts()
            query_sum, recon_sum = full.share(dist.rows()).to(device).loss_sums(net)
            lam = lam_at(step, cfg) if model.reconstructs_context else 1.0
            # the batch means, as shares of this process; DDP averages gradients over processes, hence x world
            loss = dist.world * (lam * query_sum / n_query + (1 - lam) * recon_sum / max(1, n_masked))
            query_loss = query_sum.item() / n_query  # this process's share, for the progress bar
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, cfg)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            elapsed = time.monotonic() - started
            bar.update(1)
            bar.set_postfix(loss=f"{query_loss:.4f}", lam=f"{lam:.2f}")
            if step % cfg.validate_every == 0 or step == cfg.steps:
                batch_loss = dist.total(query_sum.item()) / n_query  # collective: every process takes part
                if dist.is_main:
                    r2 = validator.r2(model, device)
                    history.append({"step": step, "minutes": round(elapsed / 60, 2), "query_loss": batch_loss, "val_r2": r2})
                    log.info("step %d: query loss %.4f, validation r2 %.4f", step, batch_loss, r2)
                    bar.set_postfix(loss=f"{batch_loss:.4f}", val_r2=f"{r2:.4f}")
            if step % cfg.checkpoint_every == 0 and dist.is_main:
                modeldir.save_torch(checkpoint_path, snapshot())
    bar.close()
    finished = step >= cfg.steps or elapsed >= cfg.max_minutes * 60
    if not dist.is_main:
        return {"steps": step, "minutes": round(elapsed / 60, 2), "finished": finished, "history": history}
    if not history or history[-1]["step"] != step:
        history.append({"step": step, "minutes": round(elapsed / 60, 2), "val_r2": validator.r2(model, device)})
    modeldir.save_torch(checkpoint_path, snapshot())
    provenance = {
        "genimpute_version": __version__,
        "command": " ".join(sys.argv),
        "panels": [{"panel": str(r), "array": str(a), "samples": len(ts.panel.samples), "records": len(ts.panel),
                    "typed_sites": int(ts.typed_mask.sum()),
                    "validation_samples": [ts.panel.samples[h // 2] for h in ts.val_haps[::2]]}
                   for r, a, ts in zip(refs, arrays, sets)],
        "panel_fingerprint": fingerprint,
        "genetic_map": None if genetic_map is None else str(genetic_map),
        "initialised_from": initialised_from,
        "parameters": n_params,
        "processes": dist.world,
        "steps": step,
        "minutes": round(elapsed / 60, 2),
        "finished": finished,
        "history": history,
    }
    modeldir.write_json(out / modeldir.CONFIG, config.to_dict())
    modeldir.save_torch(out / modeldir.WEIGHTS, {"model": model.state_dict()})
    modeldir.write_json(out / modeldir.PROVENANCE, provenance)
    if not finished:
        log.warning("stopped at step %d of %d; `genimpute train --resume` continues", step, cfg.steps)
    return provenance

