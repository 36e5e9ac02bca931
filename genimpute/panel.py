"""The reference panel store and the alignment of targets and arrays to it."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from genimpute.errors import CheckpointError, InputError, PanelMismatchError
from genimpute.harmonise import ALLELE_MISMATCH, NOT_IN_PANEL, harmonise, recode_rows, summarise, write_audit
from genimpute.io.array_list import ArraySites
from genimpute.io.coded_rows import CodedRows
from genimpute.io.contigs import normalise_contig
from genimpute.io.delta_positions import DeltaPositions
from genimpute.io.integrity import check_complete
from genimpute.io.genetic_map import CM_PER_BP, GeneticMap, centimorgans
from genimpute.io.file_rows import FileRows, RowSpool, npz_rows, packed_blocks, write_npz
from genimpute.io.scratch import naming, publish
from genimpute.io.sparse_rows import SparseRows, SparseSpool, ones_by_row
from genimpute.io.vcf_reader import ABSENT, MISSING, PanelData, TargetData, read_panel
from genimpute.io.vcf_reader import contig_spans as vcf_contig_spans
from genimpute.io.vcf_writer import check_output_directory

log = logging.getLogger(__name__)

# `genimpute panel` files: the panel's records with their genetic positions, read without parsing VCF.
# Format 3 keeps a rare record as the list of its carriers (genimpute.io.sparse_rows), as the gaps
# between them (genimpute.io.delta_positions), and the others' rows in blocks by their distinct columns
# (genimpute.io.coded_rows); format 2 kept the lists as uint32 and those rows whole, format 1 every record
# whole, and both are read still (as is a model directory's panel.npz written then).
COMPACT_FORMAT = "genimpute-panel/3"
COMPACT_FORMATS_READ = ("genimpute-panel/1", "genimpute-panel/2", COMPACT_FORMAT)
_ZIP_MAGIC = b"PK\x03\x04"


def _join(strings: list) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode(), dtype=np.uint8)


def _split(blob: np.ndarray) -> list:
    return blob.tobytes().decode().split("\n")


def alt_counts(packed, block_bytes: int = 64 << 20) -> np.ndarray:
    """(M,) int64 the ALT alleles of each record of packed (M, ceil(H/8))
    (np.packbits pads with 0s), counted a block of records at a time:
    unpacked whole, a panel would take 8 bytes for each packed one."""
    return packed.ones() if isinstance(packed, SparseRows) else ones_by_row(packed, block_bytes)


def alt_frequency(counts: np.ndarray, n_haplotypes: int) -> np.ndarray:
    """(M,) float32 ALT allele frequency of records with these ALT counts, as
    a compact panel stores it (so a VCF's MAF bins are its compact file's)."""
    return (counts / n_haplotypes).astype(np.float32)


@dataclass
class ReferencePanel:
    """Phased biallelic haplotypes, bit-packed per record (variant-major):
    in memory when read from a VCF, read a few records at a time from a
    compact panel's file or a spool, where a rare record is kept as the
    list of its carriers (genimpute.io.sparse_rows)."""

    samples: list
    contig_names: list  # contig names as written in the panel, in file order
    contig_index: np.ndarray  # (M,) int32 index into contig_names
    positions: np.ndarray  # (M,) int64
    ids: list
    refs: list
    alts: list
    packed: np.ndarray | FileRows | SparseRows  # (M, ceil(H/8)) uint8, rows read by indexing
    alt_freq: np.ndarray  # (M,) float32 alt allele frequency in the panel
    # (M,) float64 genetic positions, cM: from a genetic map (with_genetic_map), else 1 cM per Mb
    centimorgans: np.ndarray | None = None

    def __post_init__(self):
        if self.centimorgans is None:
            self.centimorgans = self.positions * CM_PER_BP

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
        counts = alt_counts(data.packed)
        return cls(
            samples=data.samples,
            contig_names=names,
            contig_index=np.asarray(index, dtype=np.int32),
            positions=data.records.positions,
            ids=data.records.ids,
            refs=data.records.refs,
            alts=data.records.alts,
            packed=data.packed,
            alt_freq=alt_frequency(counts, data.n_haplotypes),
        )

    @classmethod
    def from_vcf(cls, path: str | Path, packed=None) -> "ReferencePanel":
        """The panel of a VCF/BCF; `packed`: where its packed records go (genimpute.io.vcf_reader.read_panel)."""
        return cls.from_data(read_panel(path, packed))

    def with_genetic_map(self, genetic_map: str | Path | GeneticMap) -> "ReferencePanel":
        """The panel with the genetic positions of a map (a file, read once,
        or a GeneticMap), which must cover each of the panel's contigs."""
        genetic_map = genetic_map if isinstance(genetic_map, GeneticMap) else GeneticMap(genetic_map)
        cm = np.empty(len(self.positions), dtype=np.float64)
        for c, name in enumerate(self.contig_names):
            rows = self.contig_index == c
            cm[rows] = centimorgans(self.positions[rows], *genetic_map.on(name))
        return replace(self, centimorgans=cm)

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
        for part in (*map(_join, parts), self.contig_index, self.positions):
            data = np.ascontiguousarray(part).tobytes()
            h.update(len(data).to_bytes(8, "little"))  # length prefix: no two splits hash alike
            h.update(data)
        h.update((self.packed.shape[0] * self.packed.shape[1]).to_bytes(8, "little"))
        for block in packed_blocks(self.packed):
            h.update(block.tobytes())
        return h.hexdigest()

    def in_memory(self) -> "ReferencePanel":
        """The panel with its records in memory (itself, if they are), as
        kept (SparseRows.in_memory: the rare ones listed) or bit-packed: for
        the window models, which read a window's records at every step, far
        more slowly from the file when they are scattered."""
        if isinstance(self.packed, np.ndarray):
            return self
        return replace(self, packed=self.packed.in_memory() if isinstance(self.packed, SparseRows) else self.packed[:])

    # --- persistence -----------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the panel to `path`, its records as SparseRows keep them
        (others are split into a spool beside `path` first, a block at a time)."""
        if isinstance(self.packed, SparseRows):
            return self._save(path, self.packed)
        with SparseSpool(Path(path).parent) as spool:
            for block in packed_blocks(self.packed):
                spool.append(block)
            self._save(path, spool.rows())

    def _save(self, path: str | Path, rows: SparseRows) -> None:
        """The records coded (coded_rows, delta_positions) into spools beside
        `path`, unless they were read so, then written out."""
        directory = Path(path).parent
        with RowSpool(directory, np.uint16) as index, RowSpool(directory) as sequences, RowSpool(directory) as gaps:
            whole = rows.whole if isinstance(rows.whole, CodedRows) else CodedRows.code(rows.whole, index, sequences)
            listed = rows.positions if isinstance(rows.positions, DeltaPositions) else \
                DeltaPositions.code(rows.positions, rows.starts, gaps)
            self._write(path, rows, whole, listed)

    def _write(self, path: str | Path, rows: SparseRows, whole: CodedRows, listed: DeltaPositions) -> None:
        with open(path, "wb") as handle:
            write_npz(handle, dict(
                format=np.array(COMPACT_FORMAT),
                samples=_join(self.samples),
                contig_names=_join(self.contig_names),
                contig_index=self.contig_index,
                positions=self.positions,
                ids=_join(self.ids),
                refs=_join(self.refs),
                alts=_join(self.alts),
                alt_freq=self.alt_freq,
                centimorgans=self.centimorgans,
                whole_at=rows.whole_at,
                starts=rows.starts,
                ones_listed=rows.ones_listed,
                whole_block_starts=whole.block_starts,
                whole_sequence_starts=whole.sequence_starts,
                listed_byte_starts=listed.byte_starts,
            ), dict(whole_index=(whole.index.shape, np.uint16, packed_blocks(whole.index)),
                    whole_sequences=(whole.sequences.shape, np.uint8, packed_blocks(whole.sequences)),
                    listed_gaps=(listed.data.shape, np.uint8, packed_blocks(listed.data))))

    @classmethod
    def load(cls, path: str | Path, centimorgans_optional: bool = False) -> "ReferencePanel":
        """The panel `save` wrote to `path`. `centimorgans_optional`: the file
        may predate genetic positions (a format-1 model directory's panel.npz,
        genimpute.modeldir), which then read as 1 cM per Mb; any other file
        without them is corrupted."""
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
                    packed=_stored_rows(path, z),
                    alt_freq=z["alt_freq"],
                    centimorgans=z["centimorgans"] if "centimorgans" in z or not centimorgans_optional else None,
                )
        except FileNotFoundError as exc:
            raise CheckpointError(f"{path}: reference panel missing from the model directory") from exc
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path}: reference panel file is corrupted ({exc})") from exc


def _stored_rows(path: str | Path, z) -> SparseRows | FileRows:
    """The records of a compact panel's file (z: the file opened by np.load):
    format 3's as kept, listed (as gaps) or coded; format 2's listed or whole; format 1's whole."""
    if "packed" in z:
        return npz_rows(path, "packed")
    if "whole" in z:
        return SparseRows(npz_rows(path, "whole"), npz_rows(path, "listed"), z["whole_at"], z["starts"],
                          z["ones_listed"])
    whole = CodedRows(npz_rows(path, "whole_index"), npz_rows(path, "whole_sequences"), z["whole_block_starts"],
                      z["whole_sequence_starts"])
    listed = DeltaPositions(npz_rows(path, "listed_gaps"), z["listed_byte_starts"], z["starts"])
    return SparseRows(whole, listed, z["whole_at"], z["starts"], z["ones_listed"])


class ShownSpool(SparseSpool):
    """A SparseSpool that shows how many records it holds as they come: a
    bar on a terminal (`shown`), and a log line every LOG_EVERY records.
    For `genimpute panel`, and `impute --ref` with a panel VCF."""

    LOG_EVERY = 200_000

    def __init__(self, directory: str | Path, shown: bool):
        self.bar = tqdm(desc="panel", unit=" records", disable=not shown, file=sys.stderr)
        self.started = time.monotonic()
        super().__init__(directory)

    def __exit__(self, *exc) -> None:
        self.bar.close()
        super().__exit__(*exc)

    def reset(self) -> None:
        super().reset()
        self.bar.reset()

    def append(self, block: np.ndarray) -> None:
        before = len(self)
        super().append(block)
        self.bar.update(len(block))
        if len(self) // self.LOG_EVERY > before // self.LOG_EVERY:
            log.info("read %d records in %.0f s", len(self), time.monotonic() - self.started)

    def rows(self) -> SparseRows:
        self.bar.close()  # the reading is done: a run's next bar takes the line
        return super().rows()


def convert_to_compact(vcf: str | Path, path: str | Path, genetic_map: str | Path | None = None,
                       force: bool = False, progress: bool = False) -> ReferencePanel:
    """Read a panel VCF/BCF (placed in cM by `genetic_map`, if given) and
    write it as a compact panel for read_reference, whole or not at all.
    The records are spooled to temporary files beside it as they are read
    (`progress`: with a bar), then copied into it: memory holds the
    records' descriptions and a block of records."""
    path = Path(path)
    if path.exists() and not force:
        raise InputError(f"{path} exists; use --force to overwrite it")
    if genetic_map is not None:
        genetic_map = GeneticMap(genetic_map)  # read before the panel: a bad map stops the run at once
    check_output_directory(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path), ShownSpool(path.parent, progress) as spool:
            panel = ReferencePanel.from_vcf(vcf, spool)
            if genetic_map is not None:
                panel = panel.with_genetic_map(genetic_map)
            panel.save(tmp)
        publish(tmp, path, force)
    finally:
        tmp.unlink(missing_ok=True)
    return read_reference(path)


def is_compact(path: str | Path) -> bool:
    """Whether `path` is a zip file, as compact panels are (False for a path
    that cannot be read: the VCF reader then says what is wrong with it)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == _ZIP_MAGIC
    except OSError:
        return False


def read_reference(path: str | Path, spool: SparseSpool | None = None) -> ReferencePanel:
    """A reference panel from a VCF/BCF, or from a compact panel file written
    by `genimpute panel`. `spool`: where a VCF/BCF's packed records go (read
    from there while it stays open), else memory."""
    if not is_compact(path):
        return ReferencePanel.from_vcf(path, spool)
    try:
        with np.load(path, allow_pickle=False) as z:
            found = str(z["format"]) if "format" in z else "a zip file without a format"
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{path}: expected a VCF/BCF or a compact panel; found an unreadable zip ({exc})") from exc
    if found not in COMPACT_FORMATS_READ:
        raise CheckpointError(f"{path}: expected a compact panel of format {' or '.join(COMPACT_FORMATS_READ)}; "
                              f"found {found} "
                              "(rebuild it with `genimpute panel`)")
    return ReferencePanel.load(path)


def contig_spans(path: str | Path) -> dict:
    """{contig: (first, last) record position} of a panel, contigs in file
    order: a compact panel's from its positions, a VCF/BCF's by reading it
    through (minutes for a large panel)."""
    if not is_compact(path):
        return vcf_contig_spans(path)
    panel = read_reference(path)
    spans = {}
    for c, name in enumerate(panel.contig_names):
        positions = panel.positions[panel.contig_index == c]
        if len(positions):
            spans[name] = (int(positions[0]), int(positions[-1]))
    return spans


def contig_names(path: str | Path) -> list[str]:
    """The contigs a panel holds records on: a compact panel's from its
    file, an indexed VCF/BCF's (.tbi or .csi beside it) from the index,
    else by reading the records through."""
    path = Path(path)
    check_complete(path)
    if is_compact(path):
        with np.load(path, allow_pickle=False) as z:
            names, index = _split(z["contig_names"]), np.unique(z["contig_index"])
        return [names[i] for i in index]
    if any(Path(f"{path}{suffix}").is_file() for suffix in (".tbi", ".csi")):
        import pysam

        try:
            with pysam.VariantFile(str(path)) as vcf:
                return list(vcf.index)
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: its index cannot be read ({exc}); index it again (bcftools index -t)") from exc
    log.info("%s has no index: reading it through for its contigs (bcftools index -t makes this instant)", path)
    return list(vcf_contig_spans(path))


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
    """Target records matched to panel records, alleles in the panel's coding."""

    panel_rows: np.ndarray  # (T,) panel record of each matched target record, increasing
    target_rows: np.ndarray  # (T,) the matched target record
    haplotypes: np.ndarray  # (T, 2S) int8 target alleles at panel_rows: 0/1, MISSING or ABSENT
    contigs: list  # panel contig indices the target covers
    unmatched_rows: np.ndarray  # target records not used (absent, mismatched, ...): passed through
    decisions: list  # every harmonisation decision (genimpute.harmonise.SiteDecision), target order
    phased: bool  # every heterozygous call at the matched records is phased

    def alleles_at(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 2S) target alleles at matched panel records `rows`."""
        return self.haplotypes[np.searchsorted(self.panel_rows, rows)]  # panel_rows is sorted, unique

    def haploid(self) -> np.ndarray:
        """(T, S) bool: the sample's call at the matched record is haploid."""
        return self.haplotypes[:, 1::2] == ABSENT

    def typed_records(self, n_panel_records: int) -> np.ndarray:
        """(M,) bool: the panel records the target types."""
        typed = np.zeros(n_panel_records, dtype=bool)
        typed[self.panel_rows] = True
        return typed

    def records_with_missing_calls(self, n_panel_records: int) -> np.ndarray:
        """(M,) bool: the panel records typed by the target where some call is missing."""
        has_missing = np.zeros(n_panel_records, dtype=bool)
        has_missing[self.panel_rows[(self.haplotypes == MISSING).any(axis=1)]] = True
        return has_missing


# shares of the target's records at which alignment stops, as a sign of a
# different genome build or allele coding rather than a few odd sites
MAX_ABSENT_SHARE = 0.5  # of records inside the panel's span: positions the panel lacks
MAX_MISMATCH_SHARE = 0.1  # of records at panel positions: alleles that cannot be reconciled
_MIN_RECORDS_FOR_SHARES = 20


def align_target(panel: ReferencePanel, target: TargetData, source: str = "target",
                 audit: str | Path | None = None) -> Alignment:
    """Match target records to panel records and recode their alleles into
    the panel's (see genimpute.harmonise); stop when the mismatch suggests a
    genome-build or strand problem rather than a few odd sites. `audit`: a
    TSV file for every site's decision, written before any such stop."""
    keys = [normalise_contig(c) for c in panel.contig_names]
    target_keys = {normalise_contig(c) for c in target.records.contigs}
    if not target_keys & set(keys):
        raise PanelMismatchError(
            f"{source}: expected contigs present in the panel ({', '.join(panel.contig_names)}); "
            f"found {', '.join(sorted(set(target.records.contigs)))}"
        )
    decisions = harmonise(panel, target)
    if audit is not None:
        write_audit(audit, decisions, panel, target)
    _check_overlap(panel, target, decisions, source)
    matched = sorted((d.panel_row, d.target_row, i) for i, d in enumerate(decisions) if d.used)
    used_targets = {d.target_row for d in decisions if d.used}
    unmatched = [t for t in range(len(target.records)) if t not in used_targets]
    counts = summarise(decisions)
    log.info("%s: %d of %d records used as evidence (%s); %d passed through unimputed", source, len(matched),
             len(target.records), ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), len(unmatched))
    if not matched:
        raise PanelMismatchError(
            f"{source}: expected records matching panel records by CHROM:POS:REF:ALT; found none "
            f"of {len(target.records)} (genome build or allele coding differs?)"
        )
    target_rows = np.asarray([t for _, t, _ in matched], dtype=np.int64)
    haplotypes = recode_rows(target.alleles, target_rows, [decisions[i] for _, _, i in matched])
    panel_rows = np.asarray([p for p, _, _ in matched], dtype=np.int64)
    return Alignment(
        panel_rows=panel_rows,
        target_rows=target_rows,
        haplotypes=haplotypes,
        contigs=sorted({int(panel.contig_index[p]) for p in panel_rows}),
        unmatched_rows=np.asarray(unmatched, dtype=np.int64),
        decisions=decisions,
        phased=bool(target.phased[np.unique(target_rows)].all()),
    )


def _check_overlap(panel: ReferencePanel, target: TargetData, decisions: list, source: str) -> None:
    """Stop when most target positions inside the panel's span are missing
    from the panel (another genome build) or too many alleles disagree."""
    span = {}
    for i, name in enumerate(panel.contig_names):
        on_contig = panel.positions[panel.contig_index == i]
        span[normalise_contig(name)] = (on_contig.min(), on_contig.max())

    def inside_span(t):
        lo, hi = span.get(normalise_contig(target.records.contigs[t]), (1, 0))
        return lo <= target.records.positions[t] <= hi

    inside = sum(inside_span(t) for t in range(len(target.records)))
    absent = sum(1 for d in decisions if d.decision == NOT_IN_PANEL and inside_span(d.target_row))
    if inside >= _MIN_RECORDS_FOR_SHARES and absent > MAX_ABSENT_SHARE * inside:
        raise PanelMismatchError(
            f"{source}: {absent} of {inside} target records inside the panel's span are at positions the panel lacks: "
            "expected most to be shared; is the target on another genome build than the panel (GRCh37 vs GRCh38)?"
        )
    at_panel = {d.target_row for d in decisions if d.decision != NOT_IN_PANEL}
    mismatched = sum(1 for d in decisions if d.decision == ALLELE_MISMATCH)
    if len(at_panel) >= _MIN_RECORDS_FOR_SHARES and mismatched > MAX_MISMATCH_SHARE * len(at_panel):
        raise PanelMismatchError(
            f"{source}: the alleles of {mismatched} of {len(at_panel)} target records at panel positions match "
            "neither the panel's nor their swap or strand complement: expected at most "
            f"{MAX_MISMATCH_SHARE:.0%}; is the target on another genome build or strand convention? "
            "(--report lists every site)"
        )
