"""Where `genimpute impute` spends its time: one run under cProfile, its
wall time split by stage (the cumulative seconds of the functions that make
each stage; the engine's numba calls are single calls to the profiler, so
their threads' work is counted once, as wall time).

    python benchmarks/profile_impute.py TARGET --ref PANEL [other impute options]

writes the imputed VCF to a temporary directory (unless --out is given)
and prints one line per stage, the rest of the run last. The profiler adds
to the Python stages' time (reading, formatting), not to numba's.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from genimpute.cli import main

# stage -> (module file suffix, function name) whose cumulative time it is; "of which" lines are
# parts of the line above, not added to the total (fill_missing's own engine calls are counted in the
# engine's lines too: a target without missing calls has none)
STAGES = {
    "open the panel": ("imputation.py", "open_reference"),
    "read the target": ("vcf_reader.py", "read_target"),
    "harmonise, panel duplicates": ("imputation.py", "_harmonised_target"),
    "engine: PBWT indexes": ("model.py", "_index"),
    "engine: untyped tables": ("model.py", "_untyped_tables"),
    "engine: segment imputation": ("model.py", "_impute_segment"),
    "typed sites with missing calls": ("copying_engine.py", "fill_missing"),
    "format records": ("records.py", "part"),
    "spool (batches joined)": ("spool.py", "joined"),
    "spool (batches stored)": ("spool.py", "put"),
    "INFO and write (compress)": ("records.py", "_write_chunk"),
    "  of which the writer": ("vcf_writer.py", "write_records"),
    "close, index, publish": ("vcf_writer.py", "__exit__"),
    "QC page": ("run_page.py", "write_run_page"),
}
SUB = ("  of which",)


def stage_seconds(stats: dict) -> dict:
    """{stage: cumulative seconds} from pstats' raw table."""
    return {stage: sum(v[3] for (file, _, fn), v in stats.items() if fn == name and file.endswith(suffix))
            for stage, (suffix, name) in STAGES.items()}


def main_() -> None:
    args = sys.argv[1:]
    if not args or "--ref" not in args:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        if "--out" not in args:
            args += ["--out", str(Path(tmp) / "profiled.vcf.gz")]
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        result = CliRunner().invoke(main, ["-q", "impute", *args])
        profiler.disable()
        wall = time.perf_counter() - started
    if result.exit_code != 0:
        sys.exit(f"impute failed: {result.output}{result.exception!r}")
    seconds = stage_seconds(pstats.Stats(profiler).stats)
    print(f"{'stage':34s} {'seconds':>8s} {'share':>6s}")
    counted = 0.0
    for stage, value in seconds.items():
        print(f"{stage:34s} {value:8.1f} {value / wall:6.1%}")
        counted += 0 if stage.startswith(SUB) else value
    print(f"{'the rest':34s} {wall - counted:8.1f} {(wall - counted) / wall:6.1%}")
    print(f"{'whole run (wall, under the profiler)':34s} {wall:8.1f}")


if __name__ == "__main__":
    main_()
