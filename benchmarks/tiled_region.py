"""A long region made of copies of a short one: a compact panel and a
target VCF repeated COPIES times along the contig, each copy shifted by the
source's span in base pairs and in cM, for the time and memory of a long
region at a panel size the series' generator cannot write over it (its VCF
text of 100,000 samples over 10 Mb would be 360 GB on disk).

The copies' haplotypes are the same, so the model finds the same matches in
each and switches only at the seams: accuracy on such a region says little.
Its typed sites, segments, margins and the engine's tables are those of a
region COPIES times as long, which is what this measures.

    python benchmarks/tiled_region.py PANEL.gpanel TARGETS.vcf.gz COPIES OUT_DIR

writes OUT_DIR/panel.gpanel and OUT_DIR/targets.vcf.gz (indexed); impute
with `genimpute impute OUT_DIR/targets.vcf.gz --ref OUT_DIR/panel.gpanel`.
Needs bgzip and tabix on PATH.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from genimpute.panel import ReferencePanel
from tiled_vcf import tile_vcf


class TiledRows:
    """The rows of `source` (M, W) repeated `copies` times, read as a
    compact panel's rows are (ReferencePanel.save reads them a block at a
    time)."""

    def __init__(self, source: np.ndarray, copies: int):
        self.source, self.shape, self.dtype = source, (copies * len(source), source.shape[1]), source.dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        return self.source[np.arange(*rows.indices(len(self)), dtype=np.int64) % len(self.source)]


def span(positions: np.ndarray) -> int:
    """The shift between copies: the source's first to last position, and one."""
    return int(positions[-1] - positions[0] + 1)


def tiled_panel(panel: ReferencePanel, copies: int) -> ReferencePanel:
    """The panel's records repeated `copies` times along its one contig."""
    if len(panel.contig_names) != 1:
        raise SystemExit(f"expected a panel of one contig; found {len(panel.contig_names)}")
    shift = span(panel.positions)
    cm_per_bp = (panel.centimorgans[-1] - panel.centimorgans[0]) / max(1, shift - 1)
    offsets = np.repeat(np.arange(copies), len(panel))
    return replace(
        panel,
        contig_index=np.tile(panel.contig_index, copies),
        positions=np.tile(panel.positions, copies) + offsets * shift,
        centimorgans=np.tile(panel.centimorgans, copies) + offsets * shift * cm_per_bp,
        ids=[i if i == "." else f"{i}_{c}" for c in range(copies) for i in panel.ids],  # no copy takes another's
        refs=panel.refs * copies, alts=panel.alts * copies,
        alt_freq=np.tile(panel.alt_freq, copies),
        packed=TiledRows(panel.packed[:], copies),
    )


def tile_targets(source: Path, out: Path, copies: int, shift: int) -> None:
    """The target VCF's records repeated `copies` times, each copy's
    positions `shift` further on, bgzipped and indexed."""
    tile_vcf(source, out, copies, shift)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("panel", type=Path, help="a compact panel (`genimpute panel --map`) of one contig")
    parser.add_argument("targets", type=Path, help="targets' VCF (bgzipped) on the panel's contig")
    parser.add_argument("copies", type=int)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.copies < 1:
        raise SystemExit(f"copies: expected at least 1; found {args.copies}")
    args.out.mkdir(parents=True, exist_ok=True)
    panel = ReferencePanel.load(args.panel)
    shift = span(panel.positions)
    tiled_panel(panel, args.copies).save(args.out / "panel.gpanel")
    tile_targets(args.targets, args.out / "targets.vcf.gz", args.copies, shift)
    print(f"{args.copies} copies of {len(panel)} records, {panel.n_haplotypes} haplotypes, "
          f"{shift * args.copies / 1e6:.1f} Mb: {args.out}")


if __name__ == "__main__":
    main()
