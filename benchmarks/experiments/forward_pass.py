"""Cost of one imputation forward pass of a trained model, and of the
alternatives tried for it: the full pass against `query_logits`, bfloat16
autocast, and one thread against the default.

    python benchmarks/experiments/forward_pass.py MODEL_DIR

Input: one fixed-size pass as impute runs it on a CPU (the backbone's
queries per pass, 1 + k rows, the model's U + T columns, random alleles).
"""

from __future__ import annotations

import sys
import time

import torch

from genimpute.config import MASKED
from genimpute.modeldir import load_model_dir
from genimpute.runtime import tune_allocator


def seconds_per_call(fn, repeats: int = 10) -> float:
    fn()
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


@torch.no_grad()
def main() -> None:
    tune_allocator()
    loaded = load_model_dir(sys.argv[1])
    model, window = loaded.model.eval(), loaded.config.window
    g = torch.Generator().manual_seed(0)
    columns = window.untyped + window.typed
    tokens = torch.randint(0, 2, (model.queries_per_cpu_pass, 1 + window.context, columns), generator=g).to(torch.int8)
    typed = torch.zeros(columns, dtype=torch.bool)
    typed[torch.randperm(columns, generator=g)[: window.typed]] = True
    tokens[:, 0, ~typed] = MASKED
    genetic = torch.arange(columns, dtype=torch.float32) * 0.001  # cM: 1 kb apart at 1 cM per Mb

    def report(label: str, fn, note: str = "") -> None:
        print(f"  {label:24s} {seconds_per_call(fn):.3f} s{note}")

    full = model(tokens, typed, genetic)[:, 0][:, ~typed]
    print(f"one pass: {tuple(tokens.shape)} cells, {torch.get_num_threads()} threads")
    report("full forward", lambda: model(tokens, typed, genetic))
    report("query_logits", lambda: model.query_logits(tokens, typed, genetic))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        change = (model.query_logits(tokens, typed, genetic).float() - full).abs().max().item()
        report("query_logits, bfloat16", lambda: model.query_logits(tokens, typed, genetic),
               f" (largest logit change {change:.3f})")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    report("query_logits, 1 thread", lambda: model.query_logits(tokens, typed, genetic))
    torch.set_num_threads(threads)

if __name__ == "__main__":
    main()
