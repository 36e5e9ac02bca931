"""Writing imputed haplotype or genotype probabilities as BGEN (layout 2),
with its Oxford .sample file and a bgenix .bgi index, published only when
complete.

The format is that of the BGEN v1.2 specification
(https://www.well.ox.ac.uk/~gav/bgen_format/spec/latest.html), the one
REGENIE, BOLT-LMM, SAIGE and PLINK 2 all read: a header, the sample
identifiers, then one block per variant, its probabilities packed in
`bits` bits each and compressed on their own (zlib; zstd, flag value 2,
comes from the v1.3 revision of the same specification, which not every
reader takes). Each record has two alleles, REF first: allele 1 is REF,
allele 2 is ALT, so the stored value of a haplotype is its probability of
REF and ALT's is implied; PLINK 2 reads the file with `--bgen FILE
ref-first`, and its dosage of ALT is then p1 + p2.

Phased output stores each haplotype's probabilities (ploidy 2, or 1 for a
haploid call); unphased output stores each call's genotype probabilities,
computed from its haplotypes as if they were independent; a record can be
unphased in a phased file (a target's unphased record passed through). A
missing call (NaN) is flagged missing, its probabilities stored as zeros. Probabilities
are rounded as the specification describes, each call's values to
multiples of 1 / (2^bits - 1) that sum to one, so a reader's values are
within 1 / (2^bits - 1) of the imputed ones, and the file is the same
bytes however its records are split into write_variants calls and however
many threads compress them.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba as nb
import numpy as np
from zlib_ng import zlib_ng

from genimpute.errors import InputError
from genimpute.io.scratch import naming, publish, remove_stale_temporaries
from genimpute.io.vcf_writer import check_output_directory
from genimpute.runtime import usable_cores

ZLIB_LEVEL = 6
ZSTD_LEVEL = 3  # zstd's own default
COMPRESSION_FLAGS = {"zlib": 1, "zstd": 2}
LAYOUT_2 = 2 << 2  # the layout field, bits 2-5 of the header's flags
SAMPLE_IDENTIFIERS = 1 << 31  # the header flag of a file that stores its sample identifiers
HEADER_LENGTH = 20  # the header block without free data: its length, variant and sample counts, magic, flags
VARIANT_COUNT_AT = 8  # the variant count's offset in the file, after the first offset and the header's length
INDEX_PREFIX_BYTES = 1000  # the file's first bytes the bgenix index stores, for a reader to check it against

BGI_SCHEMA = """
CREATE TABLE Metadata (
  filename TEXT NOT NULL,
  file_size INT NOT NULL,
  last_write_time INT NOT NULL,
  first_1000_bytes BLOB NOT NULL,
  index_creation_time INT NOT NULL
);
CREATE TABLE Variant (
  chromosome TEXT NOT NULL,
  position INT NOT NULL,
  rsid TEXT NOT NULL,
  number_of_alleles INT NOT NULL,
  allele1 TEXT NOT NULL,
  allele2 TEXT NULL,
  file_start_position INT NOT NULL,
  size_in_bytes INT NOT NULL,
  PRIMARY KEY (chromosome, position, rsid, allele1, allele2, file_start_position)
) WITHOUT ROWID;
"""


class OutputFiles:
    """Files written under hidden temporary names beside the outputs they
    become (.tmpPID.NAME), renamed into place together after a clean run and
    deleted after a failed one, so no output name ever holds a partial
    file. The first path is the main output: it is published without
    replacing one another process wrote meanwhile (unless `force`); its
    companions (index, samples, variants) follow it."""

    def __init__(self, paths: list[Path], force: bool):
        self.paths = paths
        self.force = force
        for path in paths:
            if path.exists() and not force:
                raise InputError(f"output {path}: exists; pass --force to overwrite")
            check_output_directory(path)
            remove_stale_temporaries(path)
        self.temporaries = [path.with_name(f".tmp{os.getpid()}.{path.name}") for path in paths]

    def temporary(self, path: Path) -> Path:
        return self.temporaries[self.paths.index(path)]

    def publish(self) -> None:
        with naming(self.paths[0]):
            publish(self.temporaries[0], self.paths[0], self.force)
            for tmp, path in zip(self.temporaries[1:], self.paths[1:]):
                os.replace(tmp, path)  # the companions of the output this run published

    def discard(self) -> None:
        for tmp in self.temporaries:
            tmp.unlink(missing_ok=True)


class PublishedOnExit:
    """A writer whose files are finished and published (_finish) on a
    clean exit from its `with`, and whose open handles are closed and
    temporaries deleted (_close) however it exits."""

    path: Path

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                with naming(self.path):
                    self._finish()
        finally:
            self._close()
        return False


def check_record_columns(positions, ids: list, refs: list, alts: list, p1: np.ndarray, p2: np.ndarray,
                         haploid: np.ndarray | None, n_samples: int) -> None:
    """Refuse records whose columns disagree in length or that are not
    biallelic."""
    n_records = len(positions)
    if not len(ids) == len(refs) == len(alts) == n_records:
        raise InputError(f"expected as many IDs, REF and ALT alleles as positions ({n_records}); "
                         f"found {len(ids)}, {len(refs)} and {len(alts)}")
    for name, array in (("p1", p1), ("p2", p2), ("haploid", haploid)):
        if array is not None and array.shape != (n_records, n_samples):
            raise InputError(f"{name}: expected shape ({n_records}, {n_samples}) (records, samples); "
                             f"found {array.shape}")
    multiallelic = [alt for alt in alts if "," in alt]
    if multiallelic:
        raise InputError(f"expected biallelic records (one ALT allele each); found ALT {multiallelic[0]}")


@nb.njit(cache=True, inline="always")
def _alt_units(p, top):
    """p in [0, 1] (clipped), as the nearest multiple of 1 / top, in units."""
    return np.int64(np.floor(min(max(np.float64(p), 0.0), 1.0) * top + 0.5))


@nb.njit(cache=True, inline="always")
def _genotype_units(a, b, top):
    """(P(REF/REF), P(REF/ALT)) of a call whose haplotypes carry ALT with
    probabilities a and b, independently, in units of 1 / top. Rounded as
    the BGEN specification describes, so that with the implied P(ALT/ALT)
    they sum to top: each of the three floored, then the shortfall given one
    unit at a time to those with the largest remainders (the first on a
    tie)."""
    a = min(max(np.float64(a), 0.0), 1.0)
    b = min(max(np.float64(b), 0.0), 1.0)
    hom_ref, het, hom_alt = (1.0 - a) * (1.0 - b) * top, (a * (1.0 - b) + b * (1.0 - a)) * top, a * b * top
    floors = np.floor(hom_ref), np.floor(het), np.floor(hom_alt)
    r0, r1, r2 = hom_ref - floors[0], het - floors[1], hom_alt - floors[2]
    shortfall = min(max(np.int64(top) - np.int64(floors[0] + floors[1] + floors[2]), 0), 3)
    ahead_of_hom_ref = (r1 > r0) + (r2 > r0)
    ahead_of_het = (r0 >= r1) + (r2 > r1)
    return (np.int64(floors[0]) + np.int64(ahead_of_hom_ref < shortfall),
            np.int64(floors[1]) + np.int64(ahead_of_het < shortfall))


@nb.njit(cache=True, inline="always")
def _put_bits(out, at, held, n_held, value, bits):
    """Append `value`'s low `bits` bits to the bit stream that fills out[at:]
    from each byte's least significant bit (held: the n_held < 8 bits not yet
    written); return the new (at, held, n_held)."""
    held |= value << n_held
    n_held += bits
    while n_held >= 8:
        out[at] = held & 0xFF
        held >>= 8
        n_held -= 8
        at += 1
    return at, held, n_held


@nb.njit(cache=True)
def _block_length(haploid, v, bits):
    """Bytes of record v's probability data before compression: its
    counts, ploidies, flags and one value per haplotype of each call (a
    haplotype's P(REF), or the genotype probabilities but the last)."""
    n_samples = haploid.shape[1]
    n_values = 2 * n_samples - haploid[v].sum()
    return 4 + 2 + 1 + 1 + n_samples + 1 + 1 + (n_values * bits + 7) // 8


@nb.njit(cache=True, inline="always")
def _missing(p1, p2, haploid, v, s):
    return np.isnan(p1[v, s]) or (not haploid[v, s] and np.isnan(p2[v, s]))


@nb.njit(cache=True)
def _put_ploidies(out, at, p1, p2, haploid, v):
    """Each call's ploidy byte of record v at out[at:]: 1 or 2, its top bit
    set where the call is missing (as _missing tells), in bitwise arithmetic:
    with a conditional for each part, and a short-circuit test, this loop
    took most of the writer's time."""
    for s in range(p1.shape[1]):
        a, b, one = p1[v, s], p2[v, s], haploid[v, s]
        missing = np.isnan(a) | (np.isnan(b) & ~one)
        out[at + s] = np.uint8(2 - np.uint8(one)) | (np.uint8(missing) << np.uint8(7))


@nb.njit(cache=True)
def _put_block(out, at, p1, p2, haploid, v, bits, phased):
    """Record v's probability data (layout 2) at out[at:]: sample count,
    allele count, least and greatest ploidy, each call's ploidy (its top bit
    set where missing), the phased flag (phased (V,)), bits per value, then
    the values packed (zeros for a missing call)."""
    n_samples = p1.shape[1]
    top = (1 << bits) - 1
    for i in range(4):
        out[at + i] = (n_samples >> (8 * i)) & 0xFF
    out[at + 4], out[at + 5] = 2, 0  # two alleles
    n_haploid = haploid[v].sum()
    out[at + 6] = 1 if n_haploid > 0 else 2
    out[at + 7] = 1 if n_haploid == n_samples else 2
    at += 8
    _put_ploidies(out, at, p1, p2, haploid, v)
    at += n_samples
    out[at], out[at + 1] = (1 if phased[v] else 0), bits
    at += 2
    if bits == 8 and phased[v] and n_haploid == 0:  # the default: a byte a value, no bit stream
        _put_phased_bytes(out, at, p1, p2, v)
        return
    held, n_held = np.int64(0), 0
    for s in range(n_samples):
        if _missing(p1, p2, haploid, v, s):
            for _ in range(1 if haploid[v, s] else 2):
                at, held, n_held = _put_bits(out, at, held, n_held, 0, bits)
        elif haploid[v, s]:
            at, held, n_held = _put_bits(out, at, held, n_held, top - _alt_units(p1[v, s], top), bits)
        elif phased[v]:
            at, held, n_held = _put_bits(out, at, held, n_held, top - _alt_units(p1[v, s], top), bits)
            at, held, n_held = _put_bits(out, at, held, n_held, top - _alt_units(p2[v, s], top), bits)
        else:
            hom_ref, het = _genotype_units(p1[v, s], p2[v, s], top)
            at, held, n_held = _put_bits(out, at, held, n_held, hom_ref, bits)
            at, held, n_held = _put_bits(out, at, held, n_held, het, bits)
    if n_held:
        out[at] = held & 0xFF


@nb.njit(cache=True)
def _put_phased_bytes(out, at, p1, p2, v):
    """Record v's values at out[at:] as _put_block writes them with 8 bits,
    every call diploid and phased: each haplotype's P(REF) a byte (zeros
    for a missing call). The bit stream's shifts per value were most of the
    writer's time."""
    for s in range(p1.shape[1]):
        a, b = p1[v, s], p2[v, s]
        if np.isnan(a) or np.isnan(b):
            out[at + 2 * s], out[at + 2 * s + 1] = 0, 0
        else:
            out[at + 2 * s] = 255 - _alt_units(a, 255)
            out[at + 2 * s + 1] = 255 - _alt_units(b, 255)


@nb.njit(cache=True, parallel=True, nogil=True)
def _probability_blocks(p1, p2, haploid, bits, phased):
    """(data, ends): every record's probability data before compression,
    record v's ending at ends[v], from the ALT probabilities p1, p2 (V, S)
    of each call's haplotypes (haploid (V, S): from p1 alone; phased (V,)
    each record's). Records are measured, then written, in parallel."""
    n_records = p1.shape[0]
    lengths = np.empty(n_records, dtype=np.int64)
    for v in nb.prange(n_records):
        lengths[v] = _block_length(haploid, v, bits)
    ends = np.cumsum(lengths)
    out = np.empty(ends[-1] if n_records else 0, dtype=np.uint8)
    for v in nb.prange(n_records):
        _put_block(out, ends[v] - lengths[v], p1, p2, haploid, v, bits, phased)
    return out, ends


def probability_blocks(p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None, bits: int,
                       phased) -> list[memoryview]:
    """Each record's layout-2 probability data, uncompressed, as views of
    one buffer (haploid (V, S) or None: every call diploid; phased: a bool
    for every record, or (V,) each record's)."""
    p1, p2 = np.ascontiguousarray(p1), np.ascontiguousarray(p2)
    haploid = np.zeros(p1.shape, dtype=bool) if haploid is None else np.ascontiguousarray(haploid, dtype=bool)
    phased = np.broadcast_to(np.asarray(phased, dtype=bool), len(p1)).copy()
    data, ends = _probability_blocks(p1, p2, haploid, bits, phased)
    view, ends = memoryview(data), ends.tolist()
    return [view[start:end] for start, end in zip([0, *ends[:-1]], ends)]


def _string(text: str, length_format: str, what: str) -> bytes:
    """text in UTF-8 after its length (struct format `length_format`)."""
    data = text.encode()
    limit = 1 << (8 * struct.calcsize(length_format))
    if len(data) >= limit:
        raise InputError(f"{what}: expected under {limit} bytes; found {len(data)} in {text[:40]}...")
    return struct.pack(length_format, len(data)) + data


def variant_identifiers(contig: str, position: int, variant_id: str, ref: str, alt: str) -> bytes:
    """A variant block's identifying data: ID (as both variant ID and
    rsid), chromosome, position and the two alleles, REF first."""
    if not 0 <= position < 1 << 32:
        raise InputError(f"position: expected 0 to 2^32 - 1; found {position} ({contig}, {variant_id})")
    return b"".join([_string(variant_id, "<H", "variant ID"), _string(variant_id, "<H", "variant ID"),
                     _string(contig, "<H", "contig"), struct.pack("<IH", position, 2),
                     _string(ref, "<I", "REF allele"), _string(alt, "<I", "ALT allele")])


def oxford_sample_text(samples: list[str]) -> str:
    """The Oxford .sample file of `samples`: a header line, the column types
    line, then each sample with ID_1 = ID_2 = its name and no missingness."""
    spaced = [s for s in samples if not s or any(c.isspace() for c in s)]
    if spaced:
        raise InputError(f"sample names: expected no spaces (the .sample file is space-separated); "
                         f"found {spaced[0]!r}")
    return "".join(["ID_1 ID_2 missing\n0 0 0\n", *(f"{s} {s} 0\n" for s in samples)])


def _compressor(compression: str):
    """The function compressing one block: zlib-ng (the zlib format), or
    zstd when the zstandard module is installed."""
    if compression == "zlib":
        return lambda data: zlib_ng.compress(data, ZLIB_LEVEL)
    try:
        import zstandard
    except ImportError:
        raise InputError("BGEN compression zstd: expected the Python module zstandard "
                         "(pip install zstandard); found it missing; or use zlib") from None
    return lambda data: zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)


class BgenWriter(PublishedOnExit):
    """Context manager writing `path` (a .bgen), `path` without .bgen plus
    .sample and `path`.bgi, each to a hidden temporary file beside it; on a
    clean exit the header's variant count is filled in and the three are
    renamed into place, on an error they are deleted.

    bits: 1 to 32 per stored probability; phased: haplotype probabilities
    (else genotype probabilities); compression: zlib or zstd; threads:
    those compressing blocks (the file does not depend on them)."""

    def __init__(self, path: str | Path, samples: list[str], bits: int = 8, phased: bool = True,
                 compression: str = "zlib", force: bool = False, threads: int | None = None):
        self.path = Path(path)
        if self.path.suffix != ".bgen":
            raise InputError(f"output {self.path}: expected a name ending in .bgen")
        if not isinstance(bits, int) or not 1 <= bits <= 32:
            raise InputError(f"BGEN bits per probability: expected 1 to 32; found {bits}")
        if compression not in COMPRESSION_FLAGS:
            raise InputError(f"BGEN compression: expected zlib or zstd; found {compression}")
        if not samples:
            raise InputError(f"output {self.path}: expected at least one sample; found none")
        self.samples, self.bits, self.phased = list(samples), bits, phased
        self.compression = compression
        self.compress = _compressor(compression)
        self.sample_path = self.path.with_suffix(".sample")
        self.index_path = self.path.with_name(f"{self.path.name}.bgi")
        self.sample_text = oxford_sample_text(self.samples)
        self.files = OutputFiles([self.path, self.sample_path, self.index_path], force)
        self.threads = threads or min(4, usable_cores())
        self.records = 0

    def __enter__(self):
        self.handle = self.index = None
        self.pool = ThreadPoolExecutor(max_workers=self.threads)
        try:
            self.files.temporary(self.sample_path).write_text(self.sample_text)
            self.handle = open(self.files.temporary(self.path), "wb")
            self.index = sqlite3.connect(self.files.temporary(self.index_path))
            self.index.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;" + BGI_SCHEMA)
            self.prefix = bytearray()  # the file's first bytes, for the index
            self._write(self._header())
        except BaseException:
            self._close()
            raise
        return self

    def _header(self) -> bytes:
        """The first offset, the header block (its variant count 0 until
        close) and the sample identifier block."""
        identifiers = b"".join(_string(s, "<H", "sample name") for s in self.samples)
        sample_block = struct.pack("<II", 8 + len(identifiers), len(self.samples)) + identifiers
        flags = COMPRESSION_FLAGS[self.compression] | LAYOUT_2 | SAMPLE_IDENTIFIERS
        header = struct.pack("<III4sI", HEADER_LENGTH, 0, len(self.samples), b"bgen", flags)
        return struct.pack("<I", HEADER_LENGTH + len(sample_block)) + header + sample_block

    def _write(self, data: bytes) -> None:
        if len(self.prefix) < INDEX_PREFIX_BYTES:
            self.prefix += data[:INDEX_PREFIX_BYTES - len(self.prefix)]
        self.handle.write(data)

    def write_variants(self, contig: str, positions, ids: list[str], refs: list[str], alts: list[str],
                       p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None = None,
                       phased: np.ndarray | None = None) -> None:
        """Append biallelic records of `contig`: p1, p2 (V, samples) each
        call's haplotypes' probabilities of ALT (NaN: missing); where
        haploid (V, samples) is set, a haploid call from p1 alone; phased
        (V,): the records written phased where the file is (all by default)."""
        p1, p2 = np.asarray(p1), np.asarray(p2)
        haploid = None if haploid is None else np.asarray(haploid, dtype=bool)
        check_record_columns(positions, ids, refs, alts, p1, p2, haploid, len(self.samples))
        if not len(positions):
            return
        heads = [variant_identifiers(contig, int(position), variant_id, ref, alt)  # refused before any is written
                 for position, variant_id, ref, alt in zip(positions, ids, refs, alts)]
        blocks = probability_blocks(p1, p2, haploid, self.bits,
                                    self.phased if phased is None else self.phased & np.asarray(phased, dtype=bool))
        compressed = self.pool.map(self.compress, blocks)  # in order, whatever the threads
        start = self.handle.tell()
        rows = []
        with naming(self.path):
            for position, variant_id, ref, alt, head, block, data in zip(positions, ids, refs, alts, heads, blocks,
                                                                         compressed):
                sizes = struct.pack("<II", len(data) + 4, len(block))
                self._write(head + sizes)
                self._write(data)
                size = len(head) + len(sizes) + len(data)
                rows.append((contig, int(position), variant_id, 2, ref, alt, start, size))
                start += size
        self.index.executemany("INSERT INTO Variant VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self.records += len(rows)

    def _finish(self) -> None:
        """Fill in the variant count, index the file and publish the three."""
        if self.records >= 1 << 32:
            raise InputError(f"output {self.path}: expected under 2^32 records; found {self.records}")
        count = struct.pack("<I", self.records)
        self.prefix[VARIANT_COUNT_AT:VARIANT_COUNT_AT + 4] = count
        self.handle.seek(VARIANT_COUNT_AT)
        self.handle.write(count)
        self.handle.close()
        written = self.files.temporary(self.path).stat()
        self.index.execute("INSERT INTO Metadata VALUES (?, ?, ?, ?, ?)",
                           (self.path.name, written.st_size, int(written.st_mtime), bytes(self.prefix),
                            int(time.time())))
        self.index.commit()
        self.index.close()
        self.files.publish()

    def _close(self) -> None:
        """Close what is open and delete the temporary files left (all of
        them after a failure, none after publishing)."""
        self.pool.shutdown()
        for handle in (self.handle, self.index):
            if handle is not None:
                handle.close()
        self.files.discard()
