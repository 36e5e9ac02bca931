"""What an imputation does on one core before the engine starts, step by
step: reading the target (its text reader, and htslib's path the text
reader replaces for the common target), harmonising it to the panel, its
sample table and the panel-duplicate search. Each step once, wall seconds.

    python benchmarks/target_start.py TARGET PANEL
"""

from __future__ import annotations

import sys
import time
from unittest import mock

from genimpute.identity import report_samples_in_panel
from genimpute.io import vcf_reader
from genimpute.panel import align_target, read_reference
from genimpute.run_facts import sample_table


def timed(label: str, function, *args):
    started = time.perf_counter()
    result = function(*args)
    print(f"  {label:34s} {time.perf_counter() - started:7.2f} s")
    return result


def main() -> None:
    target_path, panel_path = sys.argv[1:3]
    vcf_reader.read_target(target_path)  # loads numba's cached code, which a run has loaded by then
    print(f"{target_path} against {panel_path}:")
    target = timed("read the target", vcf_reader.read_target, target_path)
    with mock.patch.object(vcf_reader, "_read_common_target", lambda *args: None, create=True):  # older code: absent
        timed("read it by htslib's path", vcf_reader.read_target, target_path)
    panel = read_reference(panel_path)
    aln = timed("harmonise (align_target)", align_target, panel, target, "target")
    timed("sample table", sample_table, aln.haplotypes, target.samples)
    timed("panel-duplicate search", report_samples_in_panel, panel, aln, target.samples, None)


if __name__ == "__main__":
    main()
