"""Paths of the real-data slices in tests/data (see make_slices.sh)."""

from pathlib import Path

DATA = Path(__file__).parent / "data"
PANEL = DATA / "panel.vcf.gz"
TARGET_PHASED = DATA / "targets.omni2.5.vcf.gz"
TARGET_UNPHASED = DATA / "targets.omni2.5.unphased.vcf.gz"
TARGET_TRUTH = DATA / "targets.truth.vcf.gz"
ARRAY = DATA / "omni2.5_chr20_9.0-9.1Mb.txt"
