"""A prototype of another way to choose copying states, on held-out samples:
at every typed site, the panel haplotypes whose run of alleles matching the
target through that site is among the `top` longest, each then a state over
the whole segment, alone ("runsK") or added to the engine's composite states
("composite+runsK"); next to the engine (sighting neighbours at every
typed site, as these do: within 0.2% of its default's error in every bin,
docs/journal/BENCHMARKS.md stop 60) and Beagle 5.4.

Why: where the engine lost a rare allele to Beagle on a held-out sample of a
16,000-sample panel, the 26 haplotypes sharing the target's longest run
through the site all carried it, yet over a thousand others, matching as
long on one side of it, held most of the posterior (docs/journal/BENCHMARKS.md, stop 35).
The PBWT neighbours rank matches ending (or starting) at a site; this ranks
the whole run through it. With ALPHAS, the engine's composite states are
kept and the model is changed instead ("jumps^A"): a switch lands on a state
with probability proportional to (its run through the site)^A, not
uniformly (A = 0 is the engine's model, a check of this forward-backward).
With STEPS, states found as Beagle 5.4 finds them ("steps C:N"): only at
the first typed site of each step of C cM (the first step half as long),
the N haplotypes either side of the target in the PBWT orders there (the
longest runs starting and ending at that site), kept in the engine's
composite states (up to 1,600, Beagle's number), where the engine looks
at every typed site. With IBS, the haplotypes at each step's first site
are instead Beagle 5's IBS set as its ImpIbs class draws it: those
carrying the target's alleles through the step, narrowed over the next
steps (up to N) until at most P remain, topped up at random from the set
one step before, or drawn at random from what is left after N steps
("ibs P:N", 0.1 cM steps). With MEANS, the mean of two of those ways'
dosages.

    python benchmarks/experiments/longest_runs.py HELDOUT_DIR PANEL ARRAY SAMPLES [--map MAP] [--tops 5,20] [--alphas 0.5,1]
        [--steps 0.1:13] [--ibs 26:7] [--means default/runs8]

HELDOUT_DIR: a heldout_large_panel.py output directory (ref.vcf.gz,
held_out.txt, beagle.vcf.gz); PANEL the panel it held samples out of, ARRAY
its array sites, MAP the genetic map heldout_large_panel.py was given
(without it, 1 cM per Mb, which the simulated series' map is not: it has
1.68); the first SAMPLES held-out samples are imputed. Computes
every haplotype's runs in numpy for --tops: about 1.4 s per target
haplotype at 16,000 samples, for contigs of one segment only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the maintained scripts this one reads
from paired_errors import report

from genimpute.copying import ContigModel
from genimpute.copying.hmm import switch_probabilities
from genimpute.copying.model import _impute_haplotype
from genimpute.copying.pbwt import _sightings
from genimpute.copying.states import _composite_states, _state_alleles
from genimpute.copying.untyped import _impute_untyped
from genimpute.config import CopyingSettings
from genimpute.evaluation import BIN_LABELS, maf_bin
from genimpute.panel import ReferencePanel


def runs_through(panel_alleles: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(t, H) the length in typed sites of each haplotype's run of alleles
    matching target (t,) through each site (0 where it differs there)."""
    same = panel_alleles == target[:, None]
    left, right = np.zeros(same.shape, np.int32), np.zeros(same.shape, np.int32)
    for i in range(len(same)):
        left[i] = (left[i - 1] + 1 if i else 1) * same[i]
    for i in range(len(same) - 1, -1, -1):
        right[i] = (right[i + 1] + 1 if i < len(same) - 1 else 1) * same[i]
    return np.where(same, left + right - 1, 0)


def whole_segment_states(haplotypes: np.ndarray, first_slot: int, last: int) -> np.ndarray:
    """Segments (4, n) (_composite_states' layout): one slot per haplotype, over sites [0, last)."""
    segments = np.zeros((4, len(haplotypes)), np.int64)
    segments[0], segments[2], segments[3] = first_slot + np.arange(len(haplotypes)), last, haplotypes
    return segments


def composite_states(index: tuple, queries: np.ndarray, q: int, n_haplotypes: int, neighbours: int,
                     max_states: int, ignored: np.ndarray | None = None) -> np.ndarray:
    """The engine's composite states of query q (segments (4, n)), from its
    PBWT neighbours at every typed site but the `ignored` (t,) ones (the
    engine with sight_every=1)."""
    sightings = _sightings(*index, queries, np.array([q]), neighbours, 1, np.array([-1]))[0]
    if ignored is not None:
        sightings[ignored] = -1
    capacity = sightings.shape[0] * sightings.shape[1] + max_states
    segments, _ = _composite_states(sightings, 1, len(sightings), max_states,
                                    np.full(n_haplotypes, -1, np.int32), np.empty((4, capacity), np.int64),
                                    np.empty(capacity, np.int64))
    return segments.copy()


def switch_rates(model) -> np.ndarray:
    """The engine's switch probability between each pair of neighbouring typed sites."""
    return switch_probabilities(model.jump_cm, model.switch_cm)


def segment_alleles(model, segment) -> np.ndarray:
    """(t, H) the panel's alleles at the segment's typed sites (the
    engine's index holds them as bits, haplotype by haplotype)."""
    return np.ascontiguousarray(model.panel.haplotypes(model.typed_rows[segment.first:segment.last]))


def impute_every_gap(index: tuple, query: np.ndarray, segments: np.ndarray, n_states: int, jump: np.ndarray,
                     settings: CopyingSettings, out_column: np.ndarray) -> None:
    """The engine's forward-backward over `segments` (n_states composite
    states) for one query, its P(alt) at every untyped record of the
    segment written to out_column: the core is the whole segment."""
    haplotype_words, untyped = index[2], index[3]
    last = len(query)
    _impute_haplotype(haplotype_words, query.copy(), segments, n_states, last, 0, last, jump,
                      settings.error, np.float32(settings.posterior_floor), untyped, out_column,
                      np.empty(last, np.float32))


def impute(model, segment, index, queries: np.ndarray, top: int, with_composite: bool) -> np.ndarray:
    """(records, Q) P(alt) of every query at the segment's untyped records over the chosen states."""
    forward_index, backward_index = index[:2]
    last, settings, alleles = queries.shape[0], model.settings, segment_alleles(model, segment)
    jump = switch_rates(model)
    out = np.zeros((len(segment.predicted), queries.shape[1]), np.float32)
    for q in range(queries.shape[1]):
        runs = runs_through(alleles, queries[:, q])
        longest = np.unique(np.argpartition(-runs, top, axis=1)[:, :top])
        base = composite_states((forward_index, backward_index), queries, q, alleles.shape[1],
                                *model.passes[0]) \
            if with_composite else np.zeros((4, 0), np.int64)
        n_base = int(base[0].max()) + 1 if base.shape[1] else 0
        segments = np.concatenate([base, whole_segment_states(longest, n_base, last)], axis=1)
        impute_every_gap(index, queries[:, q], segments, n_base + len(longest), jump, settings, out[:, q])
    return out


STEP_STATES = 1600  # Beagle 5.4's imp-states


def step_starts(centimorgans: np.ndarray, step_cm: float) -> np.ndarray:
    """The typed sites (cM ascending) that begin each step of step_cm, the first half as long."""
    starts, boundary = [0], centimorgans[0] + step_cm / 2
    while True:
        site = max(int(np.searchsorted(centimorgans, boundary)), starts[-1] + 1)
        if site >= len(centimorgans):
            return np.array(starts)
        starts.append(site)
        boundary = centimorgans[site] + step_cm


def impute_steps(model, segment, index, queries: np.ndarray, step_cm: float, per_side: int) -> np.ndarray:
    """(records, Q) P(alt) over composite states from the PBWT neighbours at the steps' first sites only."""
    forward_index, backward_index, haplotype_words, _ = index
    last, settings, n_haplotypes = queries.shape[0], model.settings, haplotype_words.shape[0]
    jump = switch_rates(model)
    elsewhere = np.ones(last, dtype=bool)
    elsewhere[step_starts(model.panel.centimorgans[model.typed_rows[segment.first:segment.last]], step_cm)] = False
    out = np.zeros((len(segment.predicted), queries.shape[1]), np.float32)
    for q in range(queries.shape[1]):
        segments = composite_states((forward_index, backward_index), queries, q, n_haplotypes, per_side,
                                    STEP_STATES, elsewhere)
        impute_every_gap(index, queries[:, q], segments, int(segments[0].max()) + 1, jump, settings, out[:, q])
    return out


def ibs_sets(haplotype_alleles: np.ndarray, query: np.ndarray, starts: np.ndarray, per_step: int, n_steps: int,
             rng: np.random.Generator) -> np.ndarray:
    """(t, per_step) sightings, -1 padded: at each step's first site, the
    query's IBS set as Beagle 5 draws it (see the module's doc); steps
    begin at `starts` (typed sites, ascending, the first 0)."""
    t = haplotype_alleles.shape[1]
    ends = np.append(starts[1:], t)
    sightings = np.full((t, per_step), -1, dtype=np.int32)
    for k, start in enumerate(starts):
        chosen = _ibs_set(haplotype_alleles, query, starts, ends, k, per_step, n_steps, rng)
        sightings[start, :len(chosen)] = chosen
    return sightings


def _ibs_set(haplotype_alleles, query, starts, ends, k, per_step, n_steps, rng) -> np.ndarray:
    """The haplotypes of step k's IBS set (at most per_step)."""
    def carrying(members, step):
        span = slice(starts[step], ends[step])
        return members[(haplotype_alleles[members, span] == query[span]).all(axis=1)]
    members = carrying(np.arange(haplotype_alleles.shape[0]), k)
    if len(members) <= per_step:
        return members
    for step in range(k + 1, min(k + n_steps, len(starts))):
        narrower = carrying(members, step)
        if len(narrower) <= per_step:
            others = rng.permutation(np.setdiff1d(members, narrower))
            return np.concatenate([narrower, others[:per_step - len(narrower)]])
        members = narrower
    return rng.choice(members, per_step, replace=False)


def impute_ibs(model, segment, index, queries: np.ndarray, per_step: int, n_steps: int) -> np.ndarray:
    """(records, Q) P(alt) over composite states from Beagle's IBS sets at the first site of each 0.1 cM step."""
    haplotype_alleles = np.ascontiguousarray(segment_alleles(model, segment).T)
    last, settings = queries.shape[0], model.settings
    jump = switch_rates(model)
    starts = step_starts(model.panel.centimorgans[model.typed_rows[segment.first:segment.last]], 0.1)
    rng = np.random.default_rng(0)
    out = np.zeros((len(segment.predicted), queries.shape[1]), np.float32)
    slot_of = np.full(haplotype_alleles.shape[0], -1, np.int32)
    for q in range(queries.shape[1]):
        sightings = ibs_sets(haplotype_alleles, queries[:, q], starts, per_step, n_steps, rng)
        if (sightings < 0).all():  # IBS with no haplotype at any step: random ones, as Beagle takes then
            n_states = min(len(slot_of), STEP_STATES)
            segments = whole_segment_states(rng.choice(len(slot_of), n_states, replace=False), 0, last)
        else:
            capacity = sightings.size + STEP_STATES
            buffer, heap = np.empty((4, capacity), np.int64), np.empty(capacity, np.int64)
            segments, n_states = _composite_states(sightings, 1, len(sightings), STEP_STATES, slot_of, buffer,
                                                   heap)
        impute_every_gap(index, queries[:, q], segments.copy(), n_states, jump, settings, out[:, q])
    return out


def per_sample(haplotypes: np.ndarray) -> np.ndarray:
    """(records, N) dosages from (records, 2N) haplotype values, a sample's two side by side."""
    return haplotypes[:, 0::2] + haplotypes[:, 1::2]


def weighted_posteriors(state_alleles: np.ndarray, query: np.ndarray, jump: np.ndarray, error: float,
                        weights: np.ndarray) -> np.ndarray:
    """(t, K) posteriors of Li and Stephens' model over the states
    (state_alleles (t, K)) whose switches at site i land on state s with
    probability weights[i, s] / weights[i].sum() (uniform weights: the
    engine's model)."""
    emit = np.where(state_alleles == query[:, None], 1 - error, error)
    landing = weights / weights.sum(1, keepdims=True)
    forward, state = np.empty(emit.shape), landing[0] * emit[0]
    forward[0] = state / state.sum()
    for i in range(1, len(emit)):
        state = ((1 - jump[i - 1]) * forward[i - 1] + jump[i - 1] * landing[i]) * emit[i]
        forward[i] = state / state.sum()
    backward = np.ones(emit.shape[1])
    for i in range(len(emit) - 2, -1, -1):
        ahead = emit[i + 1] * backward
        backward = (1 - jump[i]) * ahead + jump[i] * (landing[i + 1] * ahead).sum()
        backward /= backward.sum()
        forward[i] *= backward
    return (forward / forward.sum(1, keepdims=True)).astype(np.float32)


def impute_weighted(model, segment, index, queries: np.ndarray, alpha: float) -> np.ndarray:
    """(records, Q) P(alt) over the engine's composite states, switches landing by run length^alpha."""
    forward_index, backward_index, haplotype_words, untyped = index
    last, settings = queries.shape[0], model.settings
    jump = switch_rates(model)
    out = np.zeros((len(segment.predicted), queries.shape[1]), np.float32)
    for q in range(queries.shape[1]):
        segments = composite_states((forward_index, backward_index), queries, q, haplotype_words.shape[0],
                                    *model.passes[0])
        state_alleles = _state_alleles(haplotype_words, segments, int(segments[0].max()) + 1, last)
        weights = np.maximum(runs_through(state_alleles, queries[:, q]), 1).astype(np.float64) ** alpha
        posterior = weighted_posteriors(state_alleles, queries[:, q], jump, settings.error, weights)
        _impute_untyped(untyped, segments, posterior, 0, last, np.float32(settings.posterior_floor),
                        out[:, q])
    return out


def beagle_dosages(path: str, samples: list, positions: np.ndarray) -> np.ndarray:
    """(records, N) Beagle's DS of samples, checked to be the panel's records in order."""
    text = subprocess.run(["bcftools", "query", "-s", ",".join(samples), "-f", "%POS[\t%DS]\n", path], check=True,
                          capture_output=True, text=True).stdout
    table = np.array([line.split("\t") for line in text.strip().split("\n")], dtype=float)
    if not np.array_equal(table[:, 0].astype(np.int64), positions):
        raise SystemExit(f"{path}: expected the panel's {len(positions)} records; found {len(table)} others")
    return table[:, 1:]


def heldout_truth(heldout: str, full_panel: str, array: str, genetic_map: str | None,
                  n_samples: int | None) -> tuple:
    """(reference panel, typed (M,), held-out sample names, their truth
    panel) of a heldout_large_panel.py directory: its reference on the map
    (None: 1 cM per Mb), the array's sites in it, and the first n_samples
    held-out samples (None: all) cut from the full panel."""
    panel = ReferencePanel.from_vcf(f"{heldout}/ref.vcf.gz")
    if genetic_map:
        panel = panel.with_genetic_map(genetic_map)
    sites = set(np.loadtxt(array, dtype=str, ndmin=2)[:, 1].astype(int))
    typed = np.isin(panel.positions, list(sites))
    held = open(f"{heldout}/held_out.txt").read().split()[:n_samples]
    subprocess.run(["bcftools", "view", "-s", ",".join(held), "-Oz", "-o", f"{heldout}/held.truth.vcf.gz",
                    full_panel], check=True)
    truth_panel = ReferencePanel.from_vcf(f"{heldout}/held.truth.vcf.gz")
    if not np.array_equal(truth_panel.positions, panel.positions):
        raise SystemExit(f"{full_panel}: expected the records of {heldout}/ref.vcf.gz")
    return panel, typed, held, truth_panel


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("heldout", "full_panel", "array"):
        parser.add_argument(name)
    parser.add_argument("n_samples", type=int)
    parser.add_argument("--map", help="the genetic map (PLINK format) the held-out samples were imputed with")
    parser.add_argument("--tops", default="", help="runsK and composite+runsK for each K, as 5,20")
    parser.add_argument("--alphas", default="", help="jumps^A for each A, as 0.5,1")
    parser.add_argument("--steps", default="", help="steps C:N for each C cM and N neighbours, as 0.1:13,0.05:13")
    parser.add_argument("--ibs", default="", help="ibs P:N for each P haplotypes a step and N steps, as 26:7")
    parser.add_argument("--means", default="", help="the mean of two of the above's dosages, as default/runs8")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    means = [x for x in args.means.split(",") if x]
    known = {"beagle", "default", *(f"{kind}{top}" for top in args.tops.split(",") if top
                                   for kind in ("runs", "composite+runs")),
             *(f"jumps^{float(a):g}" for a in args.alphas.split(",") if a),
             *(f"steps {step}" for step in args.steps.split(",") if step),
             *(f"ibs {ibs}" for ibs in args.ibs.split(",") if ibs)}
    for pair in means:
        if len(pair.split("/")) != 2 or not set(pair.split("/")) <= known:
            raise SystemExit(f"--means {pair}: expected two of {sorted(known)} joined by /")
    heldout = args.heldout
    panel, typed, held, truth_panel = heldout_truth(heldout, args.full_panel, args.array, args.map, args.n_samples)
    model = ContigModel(panel, 0, typed, CopyingSettings(sight_every=1))  # its index read at every site
    segments = model.segments()
    if len(segments) != 1 or (segments[0].first, segments[0].last) != (0, len(model.typed_rows)):
        raise SystemExit(f"expected a contig of one segment; found {len(segments)}")
    segment = segments[0]
    index = model._build(segment, *model._untyped_span(segment.core_first, segment.core_last))
    queries = np.ascontiguousarray(truth_panel.haplotypes(model.typed_rows), dtype=np.int8)
    found = {"beagle": beagle_dosages(f"{heldout}/beagle.vcf.gz", held, panel.positions)[segment.predicted],
             "default": per_sample(model.probabilities(segment, queries, np.full(queries.shape[1], -1))[0])}
    for top in (int(x) for x in args.tops.split(",") if x):
        found[f"runs{top}"] = per_sample(impute(model, segment, index, queries, top, False))
        found[f"composite+runs{top}"] = per_sample(impute(model, segment, index, queries, top, True))
    for alpha in (float(x) for x in args.alphas.split(",") if x):
        found[f"jumps^{alpha:g}"] = per_sample(impute_weighted(model, segment, index, queries, alpha))
    for step in (x for x in args.steps.split(",") if x):
        step_cm, per_side = step.split(":")
        found[f"steps {step}"] = per_sample(impute_steps(model, segment, index, queries, float(step_cm),
                                                         int(per_side)))
    for ibs in (x for x in args.ibs.split(",") if x):
        per_step, n_steps = ibs.split(":")
        found[f"ibs {ibs}"] = per_sample(impute_ibs(model, segment, index, queries, int(per_step), int(n_steps)))
    for pair in means:
        found[f"mean {pair}"] = np.mean([found[name] for name in pair.split("/")], axis=0)
    truth = per_sample(truth_panel.haplotypes(segment.predicted).astype(np.float64))
    freq = panel.alt_freq[segment.predicted]
    print(f"{len(segment.predicted)} untyped records, {len(held)} held-out samples; "
          f"error (1 - r2) in bins {' '.join(BIN_LABELS)}")
    report(found, truth, maf_bin(np.minimum(freq, 1 - freq)))


if __name__ == "__main__":
    main()
