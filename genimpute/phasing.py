"""Phasing unphased targets against the reference panel with an external
phaser found on PATH: Beagle 5.4 (`beagle`) or shapeit4 (`shapeit4`), both
in Debian. Where neither is, `find_phaser` names genimpute's own
(genimpute.copying.phaser), which the caller runs itself.

The caller has already matched the target's records to the panel's and
recoded them into the panel's alleles; this module takes arrays, not files.
The target genotypes and the panel haplotypes at those records go to the
phaser as two small bgzipped VCFs in a temporary directory, and only the
order of the two alleles of each heterozygous call is taken back from its
output. Everything else comes back exactly as given: homozygous calls,
missing calls (the phasers fill them in; genimpute imputes them itself),
half-missing calls and haploid calls.

What the phasers need, and how it is met here:
- Beagle refuses a sample whose ploidy changes along a contig ("inconsistent
  number of alleles"), as a male's chrX does between the PARs and the rest.
  Haploid calls are written as single alleles, except in such a sample,
  where they are written as homozygous diploid calls.
- Beagle reads a PLINK map (`chrom id cM bp`), shapeit4 its own (`pos chr cM`
  with a header line): a map in either format is converted to the tool's,
  restricted to the contig (`chr20` and `20` alike).
- Without a map, both assume a constant 1 cM per Mb.
- Beagle's phase does not depend on its number of threads; shapeit4's changes
  from run to run on more than one, so shapeit4 always runs on one.
- Records may share a position (the panel's split multi-allelic records; a
  SNP and an indel): output records are matched to input records by ID, and
  their position checked. No rule such as "one ALT per haplotype at a
  position" is imposed: in 1000 Genomes phase 1 the SNP and the insertion at
  20:9581332 sit on the very same 132 haplotypes.
"""

from __future__ import annotations

import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genimpute.config import BUILT_IN_PHASER, PHASERS, PhasingSettings
from genimpute.errors import InputError
from genimpute.io.bgzf import BgzfWriter
from genimpute.io.genetic_map import GeneticMap, read_map
from genimpute.io.scratch import PHASE_SCRATCH, scratch_directory
from genimpute.io.vcf_reader import ABSENT, MISSING, open_vcf
from genimpute.io.vcf_writer import COLUMNS, FILE_FORMAT, FORMAT_LINES
from genimpute.external import run_tied
from genimpute.runtime import usable_cores

log = logging.getLogger(__name__)

# PHASERS (from genimpute.config, where the CLI's --phaser choices come from):
# ("beagle", "shapeit4"), the order `auto` tries them in
__all__ = ["PHASERS", "PackedHaplotypes", "find_phaser", "phase_haplotypes", "phaser_description", "switch_errors"]

INSTALL_HINT = {"beagle": "Debian: apt-get install beagle", "shapeit4": "Debian: apt-get install shapeit4"}

_LOG_TAIL_LINES = 5
# Java's heap defaults to a quarter of the machine's memory, and what Beagle needs grows with the reference's
# samples and sites
_MEMORY_HINT = ("\nJava ran out of memory: give Beagle a larger heap through the environment "
                "(as JAVA_TOOL_OPTIONS=-Xmx20g), or phase the targets beforehand")
_CHUNK_BYTES = 1 << 24  # genotype text built per block of records of about this size
# The panel's haplotypes at the typed sites, 4 bytes of text per haplotype and record, are written for the
# phaser to read once: in a large panel much text a record, which htslib's single-threaded level 6 compressed
# many times more slowly than level 1 in worker threads (see docs/results.md)
_PHASER_LEVEL = 1


@dataclass(frozen=True)
class PackedHaplotypes:
    """Phased reference haplotypes as the panel keeps them, a bit each:
    `packed` (T, ceil(H / 8)) uint8 in np.packbits' order, H =
    n_haplotypes, of which the columns `kept` ((H,) bool; None: all) are
    the reference. Unpacked a block of records at a time as they are
    written for the phaser: a byte each, a large panel's alleles at a
    dense array's sites would take more memory than the machine has."""

    packed: np.ndarray
    n_haplotypes: int
    kept: np.ndarray | None = None

    @classmethod
    def of(cls, alleles: np.ndarray) -> PackedHaplotypes:
        """(T, H) alleles 0 and 1, packed."""
        alleles = np.asarray(alleles)
        if alleles.ndim != 2:
            raise ValueError(f"ref_haps: expected a (records, haplotypes) array; found shape {alleles.shape}")
        if alleles.size and (alleles.min() < 0 or alleles.max() > 1):
            raise ValueError("ref_haps: expected alleles 0 and 1")
        return cls(np.packbits(alleles.astype(np.uint8), axis=1), alleles.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.packed), self.n_haplotypes if self.kept is None else int(self.kept.sum())

    def rows(self, start: int, stop: int) -> np.ndarray:
        """(stop - start, shape[1]) uint8 alleles of records start .. stop - 1."""
        alleles = np.unpackbits(self.packed[start:stop], axis=1, count=self.n_haplotypes)
        return alleles if self.kept is None else alleles[:, self.kept]


# --- finding the tool ----------------------------------------------------------
def find_phaser(requested: str = "auto") -> str:
    """'auto': the first of PHASERS on PATH, else BUILT_IN_PHASER; a named
    external one must be on PATH."""
    if requested == BUILT_IN_PHASER:
        return requested
    if requested != "auto" and requested not in PHASERS:
        raise InputError(f"--phaser: expected auto, {BUILT_IN_PHASER} or one of {', '.join(PHASERS)}; "
                         f"found {requested!r}")
    candidates = PHASERS if requested == "auto" else (requested,)
    for tool in candidates:
        if shutil.which(tool):
            return tool
    if requested == "auto":
        log.info("neither %s is on PATH: phasing with genimpute's own phaser", " nor ".join(PHASERS))
        return BUILT_IN_PHASER
    wanted = " or ".join(candidates)
    hints = "; ".join(INSTALL_HINT[t] for t in candidates)
    raise InputError(f"the target is unphased and needs phasing: expected {wanted} on PATH; found none ({hints})")


# --- phasing ----------------------------------------------------------------
@dataclass(frozen=True)
class _Records:
    """The T records of one contig handed to the phaser."""

    contig: str
    positions: np.ndarray  # (T,) int64
    refs: list
    alts: list


def phase_haplotypes(tool: str, haps: np.ndarray, ref_haps: np.ndarray | PackedHaplotypes, contig: str,
                     positions: np.ndarray, refs: list, alts: list, samples: list, ref_samples: list,
                     threads: int | None = None,
                     genetic_map: str | Path | GeneticMap | tuple | None = None,
                     workdir: str | Path | None = None) -> np.ndarray:
    """Phase target genotypes at the records of ONE contig against the
    panel's haplotypes at the same records.

    haps:      (T, 2S) int8 target alleles in the panel's coding, haplotype h
               of sample s at column 2*s+h: 0/1, MISSING (-1), ABSENT (-2, the
               second haplotype of a haploid call); the order of the alleles of
               an unphased heterozygous call is arbitrary
    ref_haps:  (T, H) uint8 phased panel haplotypes, H = 2 * len(ref_samples),
               or the same as PackedHaplotypes
    positions: (T,) non-decreasing (records may share one)
    refs, alts: T biallelic allele strings

    threads:   Beagle's (default: the CPUs this process may use); shapeit4
               always runs on one, to be reproducible
    genetic_map: PLINK (`chrom id cM bp`) or shapeit4 (`pos chr cM`) format,
               optionally gzipped, or a GeneticMap already read, or the
               contig's (bp, cM) arrays, increasing; default: 1 cM per Mb
    workdir:   where the phaser's files are written [default: the system's
               temporary directory]

    Returns (T, 2S) int8: heterozygous calls in the phaser's order; every
    other cell (homozygous, missing, half-missing, haploid) as given.
    """
    if tool not in PHASERS:
        raise ValueError(f"tool: expected one of {', '.join(PHASERS)}; found {tool!r}")
    haps = np.asarray(haps)
    if not isinstance(ref_haps, PackedHaplotypes):
        ref_haps = PackedHaplotypes.of(ref_haps)
    positions = np.asarray(positions, dtype=np.int64)
    _check_arrays(haps, ref_haps, positions, refs, alts, samples, ref_samples)
    het = _heterozygous(haps)
    if not (het.sum(axis=0) >= 2).any():
        # a sample's phase is only defined relative to its other heterozygous
        # calls: with fewer than two, every order is as good as the phaser's
        log.debug("phasing %s: no sample has two heterozygous calls; nothing to phase", contig)
        return haps.astype(np.int8, copy=True)
    threads = threads or usable_cores()
    ref_names = _vcf_names(ref_samples, "ref_", set())
    target_names = _vcf_names(samples, "target_", set(ref_names))
    records = _Records(contig, positions, refs, alts)
    phased = _run_phaser(tool, records, haps, target_names, ref_haps, ref_names, threads, genetic_map, workdir)
    return _take_phase(tool, records, haps, het, phased)


def _heterozygous(haps: np.ndarray) -> np.ndarray:
    """(T, S) bool: the call has two different alleles, neither missing nor absent."""
    first, second = haps[:, 0::2], haps[:, 1::2]
    return (first >= 0) & (second >= 0) & (first != second)


def _run_phaser(tool: str, records: _Records, haps: np.ndarray, names: list, ref_haps: PackedHaplotypes,
                ref_names: list, threads: int, genetic_map: str | Path | GeneticMap | tuple | None,
                workdir: str | Path | None) -> np.ndarray:
    """(T, 2S) int8 alleles of the phaser's output for the target samples
    `names`. Its input files live in a temporary directory in `workdir`
    (the output's, so a killed run's is found and removed by the next),
    removed once its output has been read."""
    with scratch_directory(workdir, PHASE_SCRATCH) as tmp:
        ref_vcf, gt_vcf, out_prefix = tmp / "ref.vcf.gz", tmp / "gt.vcf.gz", tmp / "phased"
        _write_vcf(ref_vcf, records, ref_names, ref_haps.rows, phased=True, mixed=np.zeros(len(ref_names), bool))
        _write_vcf(gt_vcf, records, names, lambda start, stop: haps[start:stop], phased=False,
                   mixed=_mixed_ploidy(haps))
        map_path = None
        if genetic_map is not None:
            map_path = _write_map(tool, genetic_map, records.contig, tmp / "genetic.map")
        if tool == "shapeit4":  # reads through htslib's indexed readers; Beagle streams
            import pysam

            for path in (ref_vcf, gt_vcf):
                pysam.tabix_index(str(path), preset="vcf", force=True)
        cmd, out = _command(tool, ref_vcf, gt_vcf, out_prefix, records.contig, threads, map_path)
        _run(tool, cmd, out, tmp / "phaser.log")
        return _read_phased(tool, out, names, records.contig, records.positions)


def _take_phase(tool: str, records: _Records, haps: np.ndarray, het: np.ndarray, phased: np.ndarray) -> np.ndarray:
    """haps with each heterozygous call (het) in the phaser's order, where
    the phaser gave it back heterozygous; every other cell as given."""
    first, second = haps[:, 0::2], haps[:, 1::2]
    valid = het & _heterozygous(phased)
    if (het & ~valid).any():
        log.warning("%s changed %d of %d heterozygous calls on %s into other genotypes; those are kept as given",
                    tool, int((het & ~valid).sum()), int(het.sum()), records.contig)
    result = haps.astype(np.int8, copy=True)
    result[:, 0::2] = np.where(valid, phased[:, 0::2], first)
    result[:, 1::2] = np.where(valid, phased[:, 1::2], second)
    log.info("phased %d heterozygous calls of %d samples at %d records on %s with %s",
             int(valid.sum()), het.shape[1], len(records.positions), records.contig, tool)
    return result


def _check_arrays(haps, ref_haps, positions, refs, alts, samples, ref_samples) -> None:
    """The caller's arrays must describe the same T records (a programming
    error otherwise, hence ValueError)."""
    n = len(positions)
    if haps.ndim != 2 or haps.shape != (n, 2 * len(samples)):
        raise ValueError(f"haps: expected shape ({n}, {2 * len(samples)}); found {haps.shape}")
    if ref_haps.shape != (n, 2 * len(ref_samples)):
        raise ValueError(f"ref_haps: expected shape ({n}, {2 * len(ref_samples)}); found {ref_haps.shape}")
    if len(refs) != n or len(alts) != n:
        raise ValueError(f"refs, alts: expected {n} alleles each; found {len(refs)} and {len(alts)}")
    if n == 0 or not samples or not ref_samples:
        raise ValueError("expected at least one record, one target sample and one reference sample")
    if (np.diff(positions) < 0).any():
        raise ValueError("positions: expected them sorted")
    # ranges by min and max (the panel's alleles likewise in PackedHaplotypes.of), not np.isin, which widened the
    # panel's alleles to int64: eight times their bytes, and slow, in a large panel
    if haps.size and (haps.min() < ABSENT or haps.max() > 1) or (haps[:, 0::2] == ABSENT).any():
        raise ValueError("haps: expected 0, 1 or MISSING alleles, and ABSENT only as a second haplotype")


_UNSAFE_NAME = re.compile(r"\s")


def _vcf_names(names: list, prefix: str, taken: set) -> list:
    """The given sample names when they can stand in a VCF header next to
    `taken` (unique, no whitespace, not already taken); otherwise PREFIX0,
    PREFIX1, ... by order, the prefix lengthened until no name is taken.
    Samples are mapped back by order, so only uniqueness matters."""
    names = [str(n) for n in names]
    if (len(set(names)) == len(names) and not taken.intersection(names)
            and all(n and not _UNSAFE_NAME.search(n) for n in names)):
        return names
    while True:
        renamed = [f"{prefix}{i}" for i in range(len(names))]
        if not taken.intersection(renamed):
            log.debug("phasing: sample names written as %s0..%s%d (given names collide or cannot be "
                      "written)", prefix, prefix, len(names) - 1)
            return renamed
        prefix = "_" + prefix


# --- temporary VCFs -------------------------------------------------------------
_ALLELE_CHAR = np.frombuffer(b".01", dtype=np.uint8)  # indexed by allele code + 1 (MISSING, 0, 1)
_TAB, _NEWLINE, _PAD = ord("\t"), ord("\n"), 0


def _genotype_cells(haps: np.ndarray, phased: bool, mixed: np.ndarray) -> np.ndarray:
    """(n, S, 4) uint8 text of each call followed by its separator: `a|b`
    (or `a/b`), `.` for a missing allele, a haploid call as the single allele
    padded with zero bytes for the writer to drop; a haploid call of a sample
    with haploid and diploid calls on the contig (`mixed`, (S,) bool) as a
    homozygous diploid one (`a/a`, `./.`)."""
    first, second = haps[:, 0::2].astype(np.int16), haps[:, 1::2].astype(np.int16)
    haploid = second == ABSENT
    cells = np.empty(first.shape + (4,), dtype=np.uint8)
    cells[..., 0] = _ALLELE_CHAR[first + 1]
    cells[..., 1] = ord("|" if phased else "/")
    cells[..., 2] = _ALLELE_CHAR[np.where(haploid, first, second) + 1]
    cells[..., 3] = _TAB
    cells[:, -1, 3] = _NEWLINE
    cells[haploid & ~mixed[None, :], 1:3] = _PAD
    return cells


def _mixed_ploidy(haps: np.ndarray) -> np.ndarray:
    """(S,) bool: the sample has haploid and diploid calls on the contig."""
    haploid = haps[:, 1::2] == ABSENT
    return haploid.any(axis=0) & ~haploid.all(axis=0)


def _vcf_header(contig: str, names: list) -> bytes:
    """The header of a GT-only VCF of one contig and samples `names`."""
    return ("\n".join([
        FILE_FORMAT,
        f"##contig=<ID={contig}>",
        FORMAT_LINES["GT"],
        "\t".join([*COLUMNS, *names]),
    ]) + "\n").encode()


def _write_vcf(path: Path, records: _Records, names: list, rows, phased: bool, mixed: np.ndarray) -> None:
    """A bgzipped VCF of the records with GT only; record i has ID `r<i>`,
    by which the phaser's output is matched back. rows(start, stop): the
    (stop - start, 2S) alleles of those records, read a block at a time;
    mixed (S,): the samples with haploid and diploid calls on the whole
    contig (_genotype_cells), not the block, as a sample's ploidy must not
    change from block to block. Its blocks are compressed at level 1 on
    worker threads (_PHASER_LEVEL)."""
    contig, positions, refs, alts = records.contig, records.positions, records.refs, records.alts
    rows_per_chunk = max(1, _CHUNK_BYTES // (2 * 2 * len(names) + 1))
    handle = BgzfWriter(path, level=_PHASER_LEVEL)
    try:
        handle.write(_vcf_header(contig, names))
        for start in range(0, len(positions), rows_per_chunk):
            stop = min(start + rows_per_chunk, len(positions))
            cells = _genotype_cells(rows(start, stop), phased, mixed).reshape(stop - start, -1)
            padded = not phased and (cells == _PAD).any()  # a phased reference is diploid throughout: no scan
            parts = []
            for i, row in enumerate(cells, start):
                parts.append(f"{contig}\t{positions[i]}\tr{i}\t{refs[i]}\t{alts[i]}\t.\t.\t.\tGT\t".encode())
                parts.append((row[row != _PAD] if padded else row).tobytes())
            handle.write(b"".join(parts))
    finally:
        handle.close()


# --- genetic map -------------------------------------------------------------------
def _write_map(tool: str, genetic_map: str | Path | GeneticMap | tuple, contig: str, dest: Path) -> Path:
    """The map's positions on `contig` (a (bp, cM) pair: those) in the format `tool` reads."""
    bp, cm = genetic_map if isinstance(genetic_map, tuple) else read_map(genetic_map, contig)
    with open(dest, "w") as handle:
        if tool == "beagle":
            handle.writelines(f"{contig}\t.\t{c!r}\t{b}\n" for b, c in zip(bp.tolist(), cm.tolist()))
        else:
            handle.write("pos\tchr\tcM\n")
            handle.writelines(f"{b}\t{contig}\t{c!r}\n" for b, c in zip(bp.tolist(), cm.tolist()))
    return dest


# --- running the tool and reading its output ------------------------------------
def phaser_description(tool: str, n_reference_samples: int, settings: PhasingSettings = PhasingSettings()) -> str:
    """How `tool` phases against a reference of that many samples, for the output's header."""
    how = {"beagle": "its default settings", "shapeit4": "one thread",
           BUILT_IN_PHASER: f"{settings.rounds} rounds, {settings.sampled_rounds} sampled, the last "
                            f"{settings.cohort_rounds} with the cohort, {settings.states} states, "
                            f"seed {settings.seed}"}[tool]
    return f"{tool} ({how}) against {n_reference_samples} panel samples at the typed sites"


def _command(tool: str, ref: Path, gt: Path, out_prefix: Path, contig: str, threads: int,
             genetic_map: Path | None) -> tuple[list, Path]:
    """The command line and the file it writes."""
    out = Path(f"{out_prefix}.vcf.gz")
    if tool == "beagle":
        cmd = ["beagle", f"ref={ref}", f"gt={gt}", f"out={out_prefix}", "impute=false", f"nthreads={threads}"]
        return cmd + ([f"map={genetic_map}"] if genetic_map else []), out
    # shapeit4 on more than one thread phases differently from run to run (two
    # runs on two threads differed at almost every record; see docs/results.md);
    # one thread keeps genimpute's output a function of its inputs
    cmd = ["shapeit4", "--input", str(gt), "--reference", str(ref), "--region", contig, "--output", str(out),
           "--thread", "1"]
    return cmd + (["--map", str(genetic_map)] if genetic_map else []), out


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_JAVA_FRAME = re.compile(r"^\s+(at \S+\(.*\)|\.\.\. \d+ more)$")


def _log_tail(text: str, n: int = _LOG_TAIL_LINES) -> str:
    """The last n informative lines of a tool's log: progress lines
    rewritten with carriage returns reduced to their last state, colour codes
    and Java stack frames dropped."""
    lines = []
    for line in _ANSI.sub("", text).split("\n"):
        line = line.rstrip("\r").rsplit("\r", 1)[-1].rstrip()
        if line.strip() and not _JAVA_FRAME.match(line):
            lines.append(line.strip())
    return "\n".join(lines[-n:])


def _run(tool: str, cmd: list, out: Path, log_path: Path) -> None:
    log.info("phasing: %s", " ".join(map(str, cmd)))
    try:
        with open(log_path, "wb") as handle:
            code = run_tied(cmd, stdout=handle)
    except OSError as exc:  # gone from PATH, not executable
        raise InputError(f"{tool} could not be run ({exc}); {INSTALL_HINT[tool]}") from exc
    text = log_path.read_text(errors="replace")
    log.debug("%s log:\n%s", tool, text)
    if code != 0 or not out.is_file():
        problem = f"exit status {code}" if code != 0 else f"exited without writing {out.name}"
        raise InputError(f"{tool} failed to phase the target ({problem}); the last lines of its log:\n"
                         + _log_tail(text) + (_MEMORY_HINT if "OutOfMemoryError" in text else ""))


def _read_phased(tool: str, path: Path, names: list, contig: str, positions: np.ndarray) -> np.ndarray:
    """(T, 2S) int8 alleles of the phaser's output in input record order and
    `names` sample order; every input record must come back."""
    vcf = open_vcf(path)
    column = {name: i for i, name in enumerate(vcf.samples)}
    lost = [n for n in names if n not in column]
    if lost:
        raise InputError(f"{tool} output lacks {len(lost)} of the {len(names)} target samples (first: {lost[0]})")
    order = np.asarray([column[n] for n in names])
    phased = np.full((len(positions), 2 * len(names)), MISSING, dtype=np.int8)
    seen = np.zeros(len(positions), dtype=bool)
    for rec in vcf:
        match = re.fullmatch(r"r(\d+)", rec.ID or "")
        i = int(match.group(1)) if match else -1
        if not 0 <= i < len(positions) or seen[i] or rec.POS != positions[i]:
            raise InputError(f"{tool} output has a record that is not one of its input's: "
                             f"{rec.CHROM}:{rec.POS} ID {rec.ID}")
        gts = rec.genotype.array()[order]
        alleles = np.full((len(names), 2), ABSENT, dtype=np.int16)
        width = min(2, gts.shape[1] - 1)
        alleles[:, :width] = gts[:, :width]
        phased[i] = np.where(alleles < 0, np.where(alleles == -1, MISSING, ABSENT), alleles).reshape(-1)
        seen[i] = True
    vcf.close()
    if not seen.all():
        first = int(np.argmin(seen))
        raise InputError(f"{tool} dropped {int((~seen).sum())} of {len(positions)} records while phasing "
                         f"(first at {contig}:{positions[first]}); expected every record back")
    return phased


# --- scoring -------------------------------------------------------------------
def switch_errors(phased: np.ndarray, truth: np.ndarray) -> tuple[int, int]:
    """(switches, opportunities) of (T, 2S) phased haplotypes against the true
    ones: at each sample's consecutive heterozygous calls (called and
    heterozygous in both), a switch is a change of the phase relative to the
    truth. Exchanging a sample's two haplotypes throughout is no switch."""
    switches = opportunities = 0
    for s in range(truth.shape[1] // 2):
        t0, t1, p0, p1 = truth[:, 2 * s], truth[:, 2 * s + 1], phased[:, 2 * s], phased[:, 2 * s + 1]
        het = (t0 >= 0) & (t1 >= 0) & (t0 != t1) & (p0 >= 0) & (p1 >= 0) & (p0 != p1)
        flipped = p0[het] != t0[het]
        switches += int((flipped[1:] != flipped[:-1]).sum())
        opportunities += max(0, int(het.sum()) - 1)
    return switches, opportunities
