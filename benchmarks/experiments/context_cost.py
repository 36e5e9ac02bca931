"""How each backbone's time and memory grow with the context rows it reads
(issue 27). One pass on random alleles and random weights, as imputation
runs it on a CPU; each measurement in its own process, so that its peak
memory is its own.

- match: its copying model and heads over 128 queries of 1 + k rows and
  600 columns (U = T = 300), as `match` and the evidence inside every
  backbone read them.
- msa, npssm alone: their layers over 16 queries of 1 + k rows and 300
  columns (U = 100, T = 200), as issue 3 trained them.
- msa, npssm with local windows: their layers over the local windows of
  one pass (LOCAL_WINDOWS windows of 16 columns) of 1 + k rows, k being
  the body rows they read (match reads the window's k apart).
- spin: one pass of 256 queries reading k neighbours each, over a panel
  of 1,882 haplotypes encoded once (its encoding timed apart: its cost grows
  with the panel, not with k).

    python benchmarks/experiments/context_cost.py [k ...]    (default 16 32 64 128 256)

Prints, per backbone and k: seconds per pass (median of 3) and the peak
memory the pass added (MB).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

import torch

from genimpute.config import MASKED
from genimpute.models import build_model, model_config

# the local windows of one 128-query pass of msa on chr20_1kgp1 (P(alt) in (0.05, 0.95)): about 160
LOCAL_WINDOWS = 160
SPIN_PANEL = 1882  # chr20_1kgp1's training haplotypes


def _window(queries: int, rows: int, untyped: int, typed: int):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 2, (queries, rows, untyped + typed), generator=g, dtype=torch.int8)
    is_typed = torch.zeros(untyped + typed, dtype=torch.bool)
    is_typed[torch.randperm(untyped + typed, generator=g)[:typed]] = True
    tokens[:, 0, ~is_typed] = MASKED
    return tokens, is_typed, torch.arange(untyped + typed, dtype=torch.float32) * 0.001


def _pass(backbone: str, k: int):
    """A no-argument function running one pass of `backbone` with k rows."""
    torch.manual_seed(0)
    if backbone == "match":
        model = build_model(model_config("match")).eval()
        tokens, typed, cm = _window(128, 1 + k, 300, 300)
        return lambda: model.query_logits(tokens, typed, cm)
    if backbone.endswith("alone"):
        model = build_model(model_config(backbone.split()[0])).eval()
        tokens, typed, _ = _window(16, 1 + k, 100, 200)
        return lambda: model.query_logits(tokens, typed)
    if backbone.endswith("local"):
        model = build_model(model_config(backbone.split()[0])).eval()
        x = torch.randn(LOCAL_WINDOWS, 1 + k, 16, model.config.dim)
        return lambda: model.mix_query(x)
    model = build_model(model_config("spin", neighbours=k)).eval()
    context, typed, _ = _window(SPIN_PANEL, 1, 100, 200)
    memory = model.encode(context[:, 0].long(), typed)
    rows, _, _ = _window(256, 1, 100, 200)
    neighbours = torch.randint(0, SPIN_PANEL, (256, k))
    return lambda: model.query_log_odds(memory, rows[:, 0].long(), typed, neighbours)


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


@torch.no_grad()
def measure(backbone: str, k: int) -> None:
    """Print 'seconds peak_MB' of one pass (run in a process of its own)."""
    run = _pass(backbone, k)
    before = _current_rss_mb()
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{statistics.median(seconds):.4f} {max(0.0, peak - before):.0f}")


def main(ks: list[int]) -> None:
    print(f"{'backbone':14s} " + " ".join(f"{'k=' + str(k):>16s}" for k in ks) + "   (s per pass / MB)")
    for backbone in ["match", "msa alone", "npssm alone", "msa local", "npssm local", "spin"]:
        cells = []
        for k in ks:
            out = subprocess.run([sys.executable, __file__, "--one", backbone, str(k)], check=True,
                                 capture_output=True, text=True).stdout.split()
            cells.append(f"{float(out[0]):8.3f} /{float(out[1]):5.0f}")
        print(f"{backbone:14s} " + " ".join(f"{c:>16s}" for c in cells))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        measure(sys.argv[2], int(sys.argv[3]))
    else:
        main([int(k) for k in sys.argv[1:]] or [16, 32, 64, 128, 256])
