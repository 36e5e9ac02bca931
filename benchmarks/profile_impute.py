"""Where `genimpute impute` spends its time: one run under cProfile, summed
by stage (cumulative seconds of the functions that make each stage).

    python benchmarks/profile_impute.py TARGET MODEL_DIR [extra impute options]

writes the imputed VCF to a temporary directory and prints one line per stage.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from genimpute.cli import main

# stage -> (module file suffix, function name) whose cumulative time it is
STAGES = {
    "load model dir": ("modeldir.py", "load_model_dir"),
    "read target": ("vcf_reader.py", "read_target"),
    "harmonise": ("panel.py", "align_target"),
    "nearest haplotypes (context)": ("windows.py", "nearest_haplotypes"),
    "assemble window tokens": ("windows.py", "assemble_rows"),
    "window probabilities": ("predict.py", "window_probabilities"),
    "  spin: panel encodings (shared)": ("spin.py", "encode"),
    "  spin: per-query predictions": ("spin.py", "query_log_odds"),
    "format records": ("records.py", "part"),
    "write records": ("records.py", "_write_chunk"),
}
# the model's forward passes: window probabilities less the two numpy stages inside them
MODEL = ("window probabilities", ("nearest haplotypes (context)", "assemble window tokens"))


def main_() -> None:
    target, model_dir, *extra = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profiled.vcf.gz"
        profiler = cProfile.Profile()
        profiler.enable()
        result = CliRunner().invoke(main, ["-q", "impute", target, "--model", model_dir, "--out", str(out), *extra])
        profiler.disable()
    if result.exit_code != 0:
        sys.exit(f"impute failed: {result.output}")
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (calls, ncalls, tottime, cumtime, callers)
    total = sum(tottime for _, _, tottime, _, _ in stats.values())
    seconds = {stage: sum(v[3] for (file, _, fn), v in stats.items() if fn == name and file.endswith(suffix))
               for stage, (suffix, name) in STAGES.items()}
    whole, parts = MODEL
    model = seconds[whole] - sum(seconds[p] for p in parts)
    print(f"{'stage':32s} {'seconds':>8s} {'share':>6s}")
    for stage, value in seconds.items():
        print(f"{stage:32s} {value:8.1f} {value / total:6.1%}")
        if stage == whole:
            print(f"{'  of which model forward passes':32s} {model:8.1f} {model / total:6.1%}")
    print(f"{'whole run':32s} {total:8.1f}")


if __name__ == "__main__":
    main_()
