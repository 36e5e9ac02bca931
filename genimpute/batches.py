"""What a backbone is shown, in training and in prediction, by context family.

A backbone's `shares_context` puts it in one of two families (see
genimpute.models). `batch_family(model)` picks the family once; the family
object builds both a training step's batch and a prediction pass's inputs,
so training and prediction need not know which family they drive.

Nearest context (match, msa, npssm): each query has its own context, the k
panel haplotypes nearest to it on the window's typed sites, drawn from
training samples other than its own. Training also asks a backbone that
reconstructs context to predict span-masked context cells.

Shared context (spin): every query of a window shares one context, the
window's panel haplotypes, encoded once. In training that is the window's
training haplotypes less the queries' samples, and the untyped cells of a
share of them are hidden and predicted with the queries.

In training, some typed cells of each query are hidden, as missing calls
are at imputation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn.functional as F

from genimpute.config import MASKED, RunConfig, WindowConfig
from genimpute.errors import InputError
from genimpute.models.kmers import allele_classes, groups_of
from genimpute.training_set import TrainingSet
from genimpute.windows import Window, assemble_rows, block_site_weights, nearest_haplotypes, query_rows


def window_centimorgans(genetic: np.ndarray) -> torch.Tensor:
    """(M,) float32 cM of a window's columns from the first: differences
    stay exact in float32 far along a chromosome."""
    return torch.from_numpy((genetic - genetic[0]).astype(np.float32))


def query_passes(n_queries: int, per_pass: int) -> Iterator[tuple[np.ndarray, int]]:
    """(query indices (per_pass,), number of real ones) of each pass,
    padded to `per_pass` with copies of the pass's first query."""
    for start in range(0, n_queries, per_pass):
        part = np.arange(start, start + per_pass)
        n_real = min(per_pass, n_queries - start)
        part[n_real:] = start
        yield part, n_real


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
class NearestContextBatch(_Tensors):
    """Each query with its own context rows."""

    tokens: torch.Tensor  # (B, R, M) long, model input
    typed: torch.Tensor  # (M,) bool
    genetic: torch.Tensor  # (M,) float, cM of the columns (window_centimorgans)
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
class SharedContextBatch(_Tensors):
    """One context for all queries, the window's training haplotypes less
    the queries' samples. Some context rows have their untyped cells hidden
    and are predicted with the queries. With a neighbour reader, each
    predicted row also names its nearest context rows."""

    _whole = ("context", "typed", "genetic", "target_groups")

    context: torch.Tensor  # (R, M) long
    predicted: torch.Tensor  # (N, M) long, rows to predict: the queries, then the hidden context rows
    typed: torch.Tensor  # (M,) bool
    genetic: torch.Tensor  # (M,) float, cM of the columns (window_centimorgans)
    alleles: torch.Tensor  # (N, M) long, their true alleles
    is_query: torch.Tensor  # (N,) bool
    target_groups: torch.Tensor  # (Gt, K) untyped columns of each K-mer target token
    neighbours: torch.Tensor  # (N, n) long, each predicted row's nearest context rows (n = 0: not read)

    def counts(self) -> tuple[int, int]:
        n_query = int(self.is_query.sum())
        return n_query * len(self.target_groups), (len(self.is_query) - n_query) * len(self.target_groups)

    def loss_sums(self, net: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """(query cross-entropy, hidden context rows' cross-entropy) summed
        over their K-mer targets."""
        neighbours = self.neighbours if self.neighbours.shape[1] else None
        logits = net(self.context, self.predicted, self.typed, neighbours, self.genetic)  # (N, Gt, 2^K)
        classes = allele_classes(self.alleles, self.target_groups)  # (N, Gt)
        ce = F.cross_entropy(logits.transpose(1, 2), classes, reduction="none").sum(1)
        return ce[self.is_query].sum(), ce[~self.is_query].sum()


def span_mask(rng: np.random.Generator, shape: tuple, rate: float, span: int) -> np.ndarray:
    """Bool mask of `shape` hiding about `rate` of the cells, in runs of
    `span` columns (the last axis)."""
    starts = rng.random(shape) < rate / span
    mask = starts.copy()
    for shift in range(1, span):
        mask[..., shift:] |= starts[..., :-shift]
    return mask


def _with_missing_calls(rng: np.random.Generator, query_alleles: np.ndarray, window: Window,
                        missing_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """(missing (B, M) bool, seen (B, M) int8): about `missing_rate` of the
    queries' typed cells hidden, as -1 in what the queries show."""
    missing = (rng.random(query_alleles.shape) < missing_rate) & window.typed
    return missing, np.where(missing, -1, query_alleles.astype(np.int8))


def nearest_context_batch(ts: TrainingSet, window: Window, queries: np.ndarray, k: int, rng: np.random.Generator,
                          mask_rate: float, mask_span: int, missing_rate: float = 0.0, maf_weight: float = 0.0,
                          site_weights: np.ndarray | None = None) -> NearestContextBatch:
    """The (B,) panel haplotypes `queries`, each with its k nearest allowed
    haplotypes as context rows 1..k (R = 1 + k). site_weights: (t,) each
    typed site's count in the nearest-haplotype distance (default 1)."""
    haps = ts.panel.haplotypes(window.columns)  # (M, H)
    typed_haps = haps[window.typed].T  # (H, t)
    query_alleles = haps.T[queries]  # (B, M)
    missing, seen = _with_missing_calls(rng, query_alleles, window, missing_rate)
    # a query never sees its own sample nor validation samples
    exclude = np.broadcast_to(ts.is_val, (len(queries), len(ts.is_val))).copy()
    rows = np.arange(len(queries))
    exclude[rows, queries] = exclude[rows, queries ^ 1] = True
    k = min(k, len(ts.train_haps) - 2)
    context = nearest_haplotypes(seen[:, window.typed], typed_haps, k, exclude, site_weights)
    tokens = assemble_rows(haps, seen, context, window.typed)
    # the context rows' alleles are their tokens, before any are masked below
    alleles = np.concatenate([query_alleles[:, None], tokens[:, 1:]], axis=1)
    masked = span_mask(rng, tokens.shape, mask_rate, mask_span)
    masked[:, 0] = False
    tokens[masked] = MASKED
    query_cells = np.zeros(tokens.shape, bool)
    query_cells[:, 0] = ~window.typed | missing
    return NearestContextBatch(
        tokens=torch.from_numpy(tokens),
        typed=torch.from_numpy(window.typed),
        genetic=window_centimorgans(ts.panel.centimorgans[window.columns]),
        alleles=torch.from_numpy(alleles.astype(np.float32)),
        query_cells=torch.from_numpy(query_cells),
        masked_cells=torch.from_numpy(masked),
        weights=torch.from_numpy(ts.maf_weights(window, haps, maf_weight)),
    )


def shared_context_batch(ts: TrainingSet, window: Window, queries: np.ndarray, kmer: int, rng: np.random.Generator,
                         mask_rate: float, missing_rate: float = 0.0, neighbours: int = 0,
                         weights: np.ndarray | None = None) -> SharedContextBatch:
    """The (B,) panel haplotypes `queries` and the context they share, about
    `mask_rate` of its rows hidden and predicted with them; with
    `neighbours`, each predicted row's that many nearest context rows, by
    the typed sites' `weights` (nearest_haplotypes)."""
    haps = ts.panel.haplotypes(window.columns)  # (M, H)
    query_alleles = haps.T[queries]  # (B, M)
    _, seen = _with_missing_calls(rng, query_alleles, window, missing_rate)
    # the context: training haplotypes, less the queries' own samples
    in_context = ~ts.is_val
    in_context[queries] = in_context[queries ^ 1] = False
    context_haps = np.nonzero(in_context)[0]  # panel haplotype of each context row
    context_alleles = haps.T[context_haps].astype(np.int64)  # (R, M)
    context = context_alleles.copy()
    hidden = np.nonzero(rng.random(len(context)) < mask_rate)[0]  # datapoints whose labels are hidden
    context[np.ix_(hidden, np.nonzero(~window.typed)[0])] = MASKED
    typed = torch.from_numpy(window.typed)
    nearest = np.empty((len(queries) + len(hidden), 0), np.int64)
    if neighbours:
        predicted_typed = np.concatenate([seen, context_alleles[hidden]])[:, window.typed]
        nearest = _nearest_other_samples(predicted_typed, context_alleles[:, window.typed], context_haps, hidden,
                                         neighbours, weights)
    return SharedContextBatch(
        context=torch.from_numpy(context),
        predicted=torch.from_numpy(np.concatenate([query_rows(seen, window.typed), context[hidden]])),
        typed=typed,
        genetic=window_centimorgans(ts.panel.centimorgans[window.columns]),
        alleles=torch.from_numpy(np.concatenate([query_alleles.astype(np.int64), context_alleles[hidden]])),
        is_query=torch.from_numpy(np.arange(len(queries) + len(hidden)) < len(queries)),
        target_groups=groups_of(~typed, kmer),
        neighbours=torch.from_numpy(nearest),
    )


def _nearest_other_samples(predicted_typed: np.ndarray, context_typed: np.ndarray, context_haps: np.ndarray,
                           hidden: np.ndarray, n: int, weights: np.ndarray | None) -> np.ndarray:
    """(N, n') indices of each predicted row's nearest context rows, n' =
    min(n, R - 2). predicted_typed: (N, t), the B queries then the hidden
    context rows; context_typed: (R, t); context_haps: (R,) panel haplotype
    of each context row; hidden: the hidden rows' context indices."""
    # a hidden row reads neither itself nor its sample's other haplotype, as a query its own sample
    exclude = np.zeros((len(predicted_typed), len(context_typed)), bool)
    own_sample = (context_haps[None, :] // 2) == (context_haps[hidden, None] // 2)  # (hidden, R)
    exclude[len(predicted_typed) - len(hidden):] = own_sample
    return nearest_haplotypes(predicted_typed, context_typed, min(n, len(context_typed) - 2), exclude, weights)


def _queries_over_window(query_typed: np.ndarray, window: Window) -> np.ndarray:
    """(Q, M) int8: the queries' alleles at the typed columns, 0 elsewhere."""
    queries = np.zeros((len(query_typed), len(window.typed)), dtype=np.int8)
    queries[:, window.typed] = query_typed
    return queries


class NearestContext:
    """The family of backbones giving each query its own context."""

    def __init__(self, reconstructs_context: bool):
        self.reconstructs_context = reconstructs_context

    def check_settings(self, config: RunConfig) -> None:
        """Every training setting applies to this family."""

    def training_batch(self, ts: TrainingSet, window: Window, queries: np.ndarray, rng: np.random.Generator,
                       config: RunConfig) -> NearestContextBatch:
        train, wcfg = config.train, config.window
        # a backbone that does not reconstruct is scored on the query alone: nothing to mask
        mask_rate = train.mask_rate if self.reconstructs_context else 0.0
        return nearest_context_batch(ts, window, queries, wcfg.context, rng, mask_rate, train.mask_span,
                                     train.query_missing_rate, train.maf_weight,
                                     block_site_weights(window.typed, wcfg.near_sites, wcfg.near_weight))

    def log_odds_by_pass(self, model: torch.nn.Module, window: Window, window_haps: np.ndarray,
                         query_typed: np.ndarray, genetic: np.ndarray, wcfg: WindowConfig, device: torch.device,
                         exclude: np.ndarray | None, per_pass: int) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        """(query indices (n,), alt log-odds (n, U)) of each pass of
        `per_pass` queries; arguments as predict.window_probabilities'."""
        queries = _queries_over_window(query_typed, window)
        typed = torch.from_numpy(window.typed).to(device)
        typed_haps = window_haps[window.typed].T  # (H, t)
        centimorgans = window_centimorgans(genetic).to(device)
        k = min(wcfg.context, typed_haps.shape[0] - (0 if exclude is None else int(exclude.sum(axis=1).max())))
        weights = block_site_weights(window.typed, wcfg.near_sites, wcfg.near_weight)
        for part, n_real in query_passes(len(queries), per_pass):
            context = nearest_haplotypes(query_typed[part], typed_haps, k, None if exclude is None else exclude[part],
                                         weights)
            tokens = torch.from_numpy(assemble_rows(window_haps, queries[part], context, window.typed)).to(device)
            yield part[:n_real], model.query_logits(tokens, typed, centimorgans)[:n_real]


class SharedContext:
    """The family of backbones whose queries share one context."""

    def __init__(self, reconstructs_context: bool):
        self.reconstructs_context = reconstructs_context

    def check_settings(self, config: RunConfig) -> None:
        """Refuses settings that only nearest-context batches read."""
        if config.train.maf_weight:
            raise InputError(f"--maf-weight: expected a nearest-context backbone (match, msa, npssm); "
                             f"found {config.model.name}")

    def training_batch(self, ts: TrainingSet, window: Window, queries: np.ndarray, rng: np.random.Generator,
                       config: RunConfig) -> SharedContextBatch:
        mask_rate = config.train.mask_rate if self.reconstructs_context else 0.0
        return shared_context_batch(ts, window, queries, config.model.kmer, rng, mask_rate,
                                    config.train.query_missing_rate, config.model.context_rows(config.window),
                                    _neighbour_weights(config.model, window, config.window))

    def log_odds_by_pass(self, model: torch.nn.Module, window: Window, window_haps: np.ndarray,
                         query_typed: np.ndarray, genetic: np.ndarray, wcfg: WindowConfig, device: torch.device,
                         exclude: np.ndarray | None, per_pass: int) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        """(query indices (n,), alt log-odds (n, U)) of each pass of
        `per_pass` queries; arguments as predict.window_probabilities'."""
        typed = torch.from_numpy(window.typed).to(device)
        centimorgans = window_centimorgans(genetic).to(device)
        rows = query_rows(_queries_over_window(query_typed, window), window.typed)  # (Q, M)
        # one encoding of the panel per distinct exclusion (one when no target is in the panel)
        exclusions, which = (np.zeros((1, window_haps.shape[1]), bool), np.zeros(len(rows), int)) \
            if exclude is None else np.unique(exclude, axis=0, return_inverse=True)
        weights = _neighbour_weights(model.config, window, wcfg)
        for e, excluded in enumerate(exclusions):
            members = np.nonzero(which.ravel() == e)[0]
            context_haps = window_haps[:, ~excluded].T  # (R, M)
            memory = model.encode(torch.from_numpy(context_haps.astype(np.int64)).to(device), typed)
            context_typed = context_haps[:, window.typed]  # (R, t), for the neighbours of every pass
            n_rows = min(model.config.context_rows(wcfg), len(context_haps))
            for part, n_real in query_passes(len(members), per_pass):
                neighbours = None
                if n_rows:  # the rows it reads: nearest in the context, by index
                    neighbours = torch.from_numpy(nearest_haplotypes(
                        query_typed[members[part]], context_typed, n_rows, None, weights)).to(device)
                log_odds = model.query_log_odds(memory, torch.from_numpy(rows[members[part]]).to(device), typed,
                                                neighbours, centimorgans)
                yield members[part[:n_real]], log_odds[:n_real]


def _neighbour_weights(config, window: Window, wcfg: WindowConfig) -> np.ndarray | None:
    """The typed sites' weights in a shared-context backbone's neighbour
    search: with evidence, those the nearest-context backbones choose their
    rows by, so that its match reads the rows match was trained on."""
    return block_site_weights(window.typed, wcfg.near_sites, wcfg.near_weight) if config.evidence else None


def batch_family(model) -> NearestContext | SharedContext:
    """The context family of a backbone (its class or an instance)."""
    family = SharedContext if model.shares_context else NearestContext
    return family(model.reconstructs_context)
