"""Can a small learned model that reads the copying engine's own context
correct its P(alt)? Measured on held-out panel samples only.

For each task (a panel at an array's sites), N panel samples are held out
(a seeded draw) and the engine is built on the others. The held-out
samples are split three ways: training queries (40%), validation queries
(20%: the epoch kept, and the gate), evaluation queries (40%). The panel's records are split by
position: refiners learn from the first half of each task's region and
are scored on the second half, with the evaluation queries, so neither
the samples nor the records they are scored on were seen in training.
One refiner of each backbone is trained on the pairs of every task at
once and scored on each.

A refiner corrects only the pairs (record, query haplotype) where the
engine is unsure, P(alt) in (--unsure, 1 - --unsure); the others keep the
engine's P(alt). Each refiner is scored alone and gated: on in the MAF
bins of each task where it lowered the validation samples' error in the
training half of the records. Error: 1 - aggregate r2 of dosages pooled
in ALT copies (benchmarks/paired_errors.py), by reference-panel MAF bin,
with 90% bootstrap intervals over the evaluation samples of the refined
error less the engine's. Times are CPU seconds (all threads: numba's and
torch's), which other work on the machine inflates far less than wall time.

    nice -n 19 timeout 900 python benchmarks/refiner_heldout.py [--tasks dev_omni25,dev_quarter,sim]
        [--held-out 100] [--seed 1] [--backbones affine,mlp,reweight,attention] [--epochs 8] [--max-pairs N]
        [--out results.json]

No target sample of any benchmark set is read: only the panels, the
array site lists and the genetic map.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from paired_errors import bin_errors, bootstrap_difference, cell_sums

from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel
from genimpute.evaluation import BIN_LABELS, maf_bin
from genimpute.io.array_list import read_array_list
from genimpute.panel import ReferencePanel, array_typed_mask
from genimpute.refine.context import TOP_STATES, segment_context
from genimpute.refine.features import alt_probability, minor_truth, pair_features
from genimpute.refine.heldout import held_out, uniform_map
from genimpute.refine.train import Examples, build, corrections, fit, parameters

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
MAP = DATA / "maps" / "plink.chr20.GRCh37.map"
SIM_CM_PER_MB = 1.6788552013988714  # the simulation's uniform rate (sim_stats.json), 1e-8 per bp


def load_task(name: str) -> tuple[ReferencePanel, np.ndarray]:
    """(panel, typed mask) of a task: the dev panel at Omni2.5, at a
    quarter of those sites, or at OmniExpress; the simulated panel at its
    Omni2.5-like array."""
    if name.startswith("dev"):
        panel = ReferencePanel.from_vcf(DATA / "chr20_1kgp1" / "panel.vcf.gz").with_genetic_map(MAP)
        array = "omniexpress_chr20_b37.txt" if name == "dev_omniexpress" else "omni2.5_chr20_b37.txt"
        typed = array_typed_mask(panel, read_array_list(DATA / "arrays" / array))
        if name == "dev_quarter":
            rows = np.flatnonzero(typed)
            typed[rows[np.arange(len(rows)) % 4 != 0]] = False
        return panel, typed
    if name == "sim":
        panel = uniform_map(ReferencePanel.from_vcf(DATA / "sim_ooa_chr20_5Mb" / "panel.vcf.gz"), SIM_CM_PER_MB)
        return panel, array_typed_mask(panel, read_array_list(DATA / "sim_ooa_chr20_5Mb" / "array.omni2.5-like.txt"))
    raise SystemExit(f"unknown task {name}")


@dataclass
class Task:
    """A task's contexts and the pairs drawn from them."""

    name: str
    contexts: list = field(default_factory=list)  # (SegmentContext, truth (U, Q)) per segment
    train_queries: np.ndarray = None
    valid_queries: np.ndarray = None
    eval_queries: np.ndarray = None
    midpoint: float = 0.0  # records before it train, from it are scored
    engine_seconds: float = 0.0  # the engine's own CPU time (all threads) for the scored queries
    context_seconds: float = 0.0  # the context's, for all queries
    positions: np.ndarray = None  # the panel's positions


def build_task(name: str, n_held_out: int, seed: int, k: int = TOP_STATES, log=print) -> Task:
    """The contexts of every segment of a task for all its held-out haplotypes."""
    panel, typed = load_task(name)
    split = held_out(panel, n_held_out, seed)
    model = ContigModel(split.reference, 0, typed, CopyingSettings())
    queries = np.ascontiguousarray(split.haplotypes[model.typed_rows].astype(np.int8))
    samples = np.random.default_rng(seed + 1).permutation(n_held_out)
    n_train, n_valid = int(0.4 * n_held_out), int(0.2 * n_held_out)
    haps = lambda s: np.sort(np.concatenate([2 * s, 2 * s + 1]))
    task = Task(name, train_queries=haps(samples[:n_train]), valid_queries=haps(samples[n_train:n_train + n_valid]),
                eval_queries=haps(samples[n_train + n_valid:]), positions=panel.positions)
    task.midpoint = float(np.median(panel.positions))
    excluded = np.full(queries.shape[1], -1, dtype=np.int64)
    for segment in model.segments():
        if not task.contexts:  # loaded from numba's cache (or compiled) before anything is timed
            model.probabilities(segment, queries[:, :2], excluded[:2])
            segment_context(model, segment, queries[:, :2])
        started = time.process_time()
        model.probabilities(segment, queries[:, task.eval_queries], excluded[task.eval_queries])
        task.engine_seconds += time.process_time() - started
        started = time.process_time()
        ctx = segment_context(model, segment, queries, k=k)
        task.context_seconds += time.process_time() - started
        task.contexts.append((ctx, split.haplotypes[ctx.records]))
    log(f"{name}: {panel.n_haplotypes} panel haplotypes, {typed.sum()} typed, {len(task.contexts)} segments, "
        f"{queries.shape[1]} held-out haplotypes; engine {task.engine_seconds:.1f} CPU s for "
        f"the {len(task.eval_queries)} scored, context {task.context_seconds:.1f} CPU s for all")
    return task


def unsure_pairs(ctx, queries: np.ndarray, records: np.ndarray, unsure: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of ctx's pairs of `records` (bool (U,)) and `queries` where P(alt) is in (unsure, 1 - unsure)."""
    p = ctx.p_alt[:, queries]
    rows, index = np.nonzero(records[:, None] & (p > unsure) & (p < 1 - unsure))
    return rows, queries[index]


def examples(task: Task, queries: np.ndarray, first_half: bool, unsure: float) -> tuple:
    """(Examples, [(ctx index, rows, cols)]) of a task's unsure pairs of
    these queries in one half of its records."""
    parts, where = [], []
    for i, (ctx, truth) in enumerate(task.contexts):
        half = task.positions[ctx.records] < task.midpoint
        rows, cols = unsure_pairs(ctx, queries, half if first_half else ~half, unsure)
        parts.append((pair_features(ctx, rows, cols), minor_truth(ctx, truth, rows, cols)))
        where.append((i, rows, cols))
    return [Examples.of(p, t) for p, t in parts], [p for p, _ in parts], where


def joined(sets: list) -> Examples:
    return Examples(*(torch.cat([getattr(s, f) for s in sets]) for f in ("record", "states", "logit", "target")))


def scored(task: Task, model, unsure: float, queries: np.ndarray, first_half: bool, gate=None) -> tuple:
    """(dosages (V, N), true counts (V, N), MAF bins (V,), the refiner's
    CPU seconds) of one half of the task's records and the samples of
    `queries`, P(alt) the engine's, corrected by `model` where it is unsure
    (None: the engine's alone) in the MAF bins that `gate` (bool by bin) marks (None: all)."""
    dosage, truth, bins, seconds = [], [], [], 0.0
    for ctx, alleles in task.contexts:
        records = (task.positions[ctx.records] < task.midpoint) == first_half
        freq = ctx.alt_freq.astype(np.float64)
        record_bins = maf_bin(np.minimum(freq, 1 - freq))
        p = ctx.p_alt.astype(np.float64).copy()
        if model is not None:
            started = time.process_time()
            corrected = records if gate is None else records & gate[record_bins]
            rows, cols = unsure_pairs(ctx, queries, corrected, unsure)
            pairs = pair_features(ctx, rows, cols)
            p[rows, cols] = alt_probability(pairs, corrections(model, Examples.of(pairs)))
            seconds += time.process_time() - started
        p, a = p[records][:, queries], alleles[records][:, queries].astype(np.float64)
        dosage.append(p[:, 0::2] + p[:, 1::2])
        truth.append(a[:, 0::2] + a[:, 1::2])
        bins.append(record_bins[records])
    return np.concatenate(dosage), np.concatenate(truth), np.concatenate(bins), seconds


def gate_of(task: Task, model, unsure: float) -> np.ndarray:
    """(bins,) bool: the MAF bins where the model lowers the error of the
    validation samples in the training half of the records (not those it
    is scored on), the choice a user's own held-out panel samples make."""
    engine, truth, bins, _ = scored(task, None, unsure, task.valid_queries, True)
    refined = scored(task, model, unsure, task.valid_queries, True)[0]
    return np.array(bin_errors(refined, truth, bins)[1]) < np.array(bin_errors(engine, truth, bins)[1])


def _scores(dosage, engine, truth, bins, overall, by_bin, seconds, n_haps) -> dict:
    err, err_bins = bin_errors(dosage, truth, bins)
    over_samples = bootstrap_difference(cell_sums(dosage, truth, 0), cell_sums(engine, truth, 0))
    return {"error": err, "by_bin": err_bins, "ratio": err / overall,
            "ratio_by_bin": [e / b if b > 0 else float("nan") for e, b in zip(err_bins, by_bin)],
            "difference_interval_samples": list(over_samples), "seconds_per_haplotype": seconds / n_haps}


def report_task(task: Task, models: dict, unsure: float, log=print) -> dict:
    """Each backbone's error against the engine's on the task, overall and
    by bin, with 90% intervals over samples; alone and gated (gate_of)."""
    engine, truth, bins, _ = scored(task, None, unsure, task.eval_queries, False)
    overall, by_bin = bin_errors(engine, truth, bins)
    n_haps = len(task.eval_queries)
    result = {"variants": len(bins), "variants_by_bin": np.bincount(bins, minlength=len(BIN_LABELS)).tolist(),
              "engine": {"error": overall, "by_bin": by_bin, "seconds_per_haplotype": task.engine_seconds / n_haps,
                         "context_seconds_per_haplotype": task.context_seconds / len(task.contexts[0][0].p_alt[0])}}
    log(f"{task.name}: {len(bins)} scored variants x {n_haps // 2} samples; bins {' '.join(BIN_LABELS)}")
    log(f"  engine          all {overall:.4g} | {' '.join(f'{e:.3g}' for e in by_bin)} | "
        f"{1e3 * task.engine_seconds / n_haps:.2f} CPU ms/haplotype")
    for name, model in models.items():
        gate = gate_of(task, model, unsure)
        for label, chosen in ((name, None), (f"{name}+gate", gate)):
            dosage, _, _, seconds = scored(task, model, unsure, task.eval_queries, False, chosen)
            r = result[label] = _scores(dosage, engine, truth, bins, overall, by_bin, seconds, n_haps)
            if chosen is not None:
                r["gate"] = gate.tolist()
            low, high = r["difference_interval_samples"]
            log(f"  {label:15s} all {r['error']:.4g} (x{r['ratio']:.3f}, 90% [{low:+.2g}, {high:+.2g}]) | "
                f"{' '.join(f'{x:.3f}' for x in r['ratio_by_bin'])} | {1e3 * seconds / n_haps:.2f} CPU ms/haplotype")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="dev_omni25,dev_quarter,sim")
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backbones", default="affine,mlp,reweight,attention")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--unsure", type=float, default=1e-4)
    parser.add_argument("--states", type=int, default=TOP_STATES, help="states kept per gap (K)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-pairs", type=int, default=0,
                        help="train on at most this many of the training pairs, a seeded draw (0: all)")
    parser.add_argument("--per-task", action="store_true", help="a refiner per task, trained on its pairs alone")
    parser.add_argument("--out", default=None, help="JSON file for the figures")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tasks = [build_task(name, args.held_out, args.seed, args.states) for name in args.tasks.split(",")]
    if args.per_task:  # one refiner per task, from its own pairs alone
        results = {"args": vars(args), "tasks": {}, "backbones": {}, "training_pairs": {}}
        for task in tasks:
            models, facts, pairs = train_models([task], args)
            results["tasks"][task.name] = report_task(task, models, args.unsure)
            results["backbones"], results["training_pairs"][task.name] = facts, pairs
    else:
        models, facts, pairs = train_models(tasks, args)
        results = {"args": vars(args), "backbones": facts, "training_pairs": pairs,
                   "tasks": {t.name: report_task(t, models, args.unsure) for t in tasks}}
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


def train_models(tasks: list, args) -> tuple[dict, dict, int]:
    """({backbone: refiner}, {backbone: parameters and training seconds},
    training pairs) of refiners trained on the tasks' pairs together."""
    train = joined([e for t in tasks for e in examples(t, t.train_queries, True, args.unsure)[0]])
    valid = joined([e for t in tasks for e in examples(t, t.valid_queries, True, args.unsure)[0]])
    if 0 < args.max_pairs < len(train):
        drawn = torch.from_numpy(np.sort(np.random.default_rng(args.seed).choice(len(train), args.max_pairs, False)))
        train = Examples(*train.batch(drawn))
    print(f"{', '.join(t.name for t in tasks)}: training pairs {len(train)}, validation pairs {len(valid)} "
          f"(unsure: P(alt) in ({args.unsure:g}, 1 - {args.unsure:g}))", flush=True)
    models, facts = {}, {}
    for name in args.backbones.split(","):
        started = time.monotonic()
        model = fit(build(name, args.seed), train, valid, epochs=args.epochs, batch=args.batch, lr=args.lr,
                    seed=args.seed)
        facts[name] = {"parameters": parameters(model), "train_seconds": time.monotonic() - started}
        print(f"{name}: {parameters(model)} parameters, trained in {facts[name]['train_seconds']:.0f} s", flush=True)
        models[name] = model
    return models, facts, len(train)

if __name__ == "__main__":
    main()
