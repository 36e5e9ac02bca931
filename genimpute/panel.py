"""The reference panel store and the alignment of targets and arrays to it."""

from __future__ import annotations

import hashlib
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genimpute.errors import CheckpointError, PanelMismatchError
from genimpute.io.array_list import ArraySites
from genimpute.io.contigs import normalise_contig
from genimpute.io.vcf_reader import PanelData, TargetData, read_panel

log = logging.getLogger(__name__)


def _join(strings: list) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode(), dtype=np.uint8)


def _split(blob: np.ndarray) -> list:
    return blob.tobytes().decode().split("\n")


@dataclass
class ReferencePanel:
    """Phased biallelic haplotypes, bit-packed per record (variant-major)."""

    samples: list
    contig_names: list  # contig names as written in the panel, in file order
    contig_index: np.ndarray  # (M,) int32 index into contig_names
    positions: np.ndarray  # (M,) int64
    ids: list
    refs: list
    alts: list
    packed: np.ndarray  # (M, ceil(H/8)) uint8
    alt_freq: np.ndarray  # (M,) float32 alt allele frequency in the panel

    @property
    def n_haplotypes(self) -> int:
        return 2 * len(self.samples)

    def __len__(self) -> int:
        return len(self.positions)

    @classmethod
    def from_data(cls, data: PanelData) -> "ReferencePanel":
        names, index = [], []
        for contig in data.records.contigs:
            if not names or names[-1] != contig:
                names.append(contig)
            index.append(len(names) - 1)
        counts = np.unpackbits(data.packed, axis=1, count=data.n_haplotypes).sum(axis=1, dtype=np.int64)
        return cls(
            samples=data.samples,
            contig_names=names,
            contig_index=np.asarray(index, dtype=np.int32),
            positions=data.records.positions,
            ids=data.records.ids,
            refs=data.records.refs,
            alts=data.records.alts,
            packed=data.packed,
            alt_freq=(counts / data.n_haplotypes).astype(np.float32),
        )

    @classmethod
    def from_vcf(cls, path: str | Path) -> "ReferencePanel":
        return cls.from_data(read_panel(path))

    def haplotypes(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), H) uint8 alleles of the given records."""
        return np.unpackbits(self.packed[rows], axis=1, count=self.n_haplotypes)

    def contig_key(self, i: int) -> str:
        return normalise_contig(self.contig_names[i])

    def fingerprint(self) -> str:
        """Identifies the panel's sites and haplotypes, to catch a model
        directory paired with a different panel."""
        h = hashlib.sha256()
        parts = (self.contig_names, self.samples, self.refs, self.alts)
        for part in (*map(_join, parts), self.contig_index, self.positions, self.packed):
            data = np.ascontiguousarray(part).tobytes()
            h.update(len(data).to_bytes(8, "little"))  # length prefix: no two splits hash alike
            h.update(data)
        return h.hexdigest()

    # --- persistence -----------------------------------------------------
    def save(self, path: str | Path) -> None:
        with open(path, "wb") as handle:
            np.savez(
                handle,
                samples=_join(self.samples),
                contig_names=_join(self.contig_names),
                contig_index=self.contig_index,
                positions=self.positions,
                ids=_join(self.ids),
                refs=_join(self.refs),
                alts=_join(self.alts),
                packed=self.packed,
                alt_freq=self.alt_freq,
            )

    @classmethod
    def load(cls, path: str | Path) -> "ReferencePanel":
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls(
                    samples=_split(z["samples"]),
                    contig_names=_split(z["contig_names"]),
                    contig_index=z["contig_index"],
                    positions=z["positions"],
                    ids=_split(z["ids"]),
                    refs=_split(z["refs"]),
                    alts=_split(z["alts"]),
                    packed=z["packed"],
                    alt_freq=z["alt_freq"],
                )
        except FileNotFoundError as exc:
            raise CheckpointError(f"{path}: reference panel missing from the model directory") from exc
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path}: reference panel file is corrupted ({exc})") from exc


def array_typed_mask(panel: ReferencePanel, sites: ArraySites) -> np.ndarray:
    """(M,) bool: panel records typed by the array. A site listed with alleles
    types the record with those alleles; a bare position types the SNPs there."""
    keys = [normalise_contig(c) for c in panel.contig_names]
    mask = np.array([sites.types(keys[ci], int(pos), ref, alt)
                     for ci, pos, ref, alt in zip(panel.contig_index, panel.positions, panel.refs, panel.alts)], dtype=bool)
    if not mask.any():
        raise PanelMismatchError(
            f"array: expected sites shared with the panel (contigs {', '.join(panel.contig_names)}); "
            f"found none of {len(sites)} sites (wrong genome build or contig?)"
        )
    return mask


@dataclass
class Alignment:
    """Target records matched to panel records."""

    panel_rows: np.ndarray  # (T,) panel record of each matched target record, increasing
    target_rows: np.ndarray  # (T,) the matched target record
    haplotypes: np.ndarray  # (T, 2S) uint8 target alleles at panel_rows
    contigs: list  # panel contig indices the target covers
    unmatched_rows: np.ndarray  # target records absent from the panel (passed through)

    def alleles_at(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 2S) target alleles at matched panel records `rows`."""
        return self.haplotypes[np.searchsorted(self.panel_rows, rows)]  # panel_rows is sorted, unique


def align_target(panel: ReferencePanel, target: TargetData, source: str = "target") -> Alignment:
    """Match target records to the panel by CHROM:POS:REF:ALT."""
    keys = [normalise_contig(c) for c in panel.contig_names]
    index = {
        (keys[ci], int(pos), ref.upper(), alt.upper()): i
        for i, (ci, pos, ref, alt) in enumerate(zip(panel.contig_index, panel.positions, panel.refs, panel.alts))
    }
    target_keys = {normalise_contig(c) for c in target.records.contigs}
    if not target_keys & set(keys):
        raise PanelMismatchError(
            f"{source}: expected contigs present in the panel ({', '.join(panel.contig_names)}); "
            f"found {', '.join(sorted(set(target.records.contigs)))}"
        )
    matched = []
    unmatched = []
    for t, (contig, pos, ref, alt) in enumerate(
        zip(target.records.contigs, target.records.positions, target.records.refs, target.records.alts)
    ):
        p = index.get((normalise_contig(contig), int(pos), ref.upper(), alt.upper()))
        if p is None:
            unmatched.append(t)
        else:
            matched.append((p, t))
    if not matched:
        raise PanelMismatchError(
            f"{source}: expected records matching panel records by CHROM:POS:REF:ALT; found none "
            f"of {len(target.records)} (genome build or allele coding differs?)"
        )
    matched.sort()
    panel_rows = np.asarray([p for p, _ in matched], dtype=np.int64)
    target_rows = np.asarray([t for _, t in matched], dtype=np.int64)
    if len(np.unique(panel_rows)) != len(panel_rows):
        dup = panel_rows[np.nonzero(np.diff(panel_rows) == 0)[0][0]]
        raise PanelMismatchError(
            f"{source}: expected one record per site; found duplicates of "
            f"{panel.contig_names[panel.contig_index[dup]]}:{panel.positions[dup]}"
        )
    unphased = target_rows[~target.phased[target_rows]]
    if len(unphased):
        t = unphased[0]
        raise PanelMismatchError(
            f"{source} record {t + 1} ({target.records.contigs[t]}:{target.records.positions[t]}): "
            f"expected phased genotypes; found unphased heterozygous calls at {len(unphased)} "
            "records (phase first, e.g. with Beagle or shapeit4)"
        )
    log.info(
        "%s: %d of %d records match the panel; %d passed through unimputed",
        source, len(matched), len(target.records), len(unmatched),
    )
    return Alignment(
        panel_rows=panel_rows,
        target_rows=target_rows,
        haplotypes=target.alleles[target_rows].astype(np.uint8),
        contigs=sorted({int(panel.contig_index[p]) for p in panel_rows}),
        unmatched_rows=np.asarray(unmatched, dtype=np.int64),
    )
