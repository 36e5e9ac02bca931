"""The reference panel store and the alignment of arrays and targets to it."""

from __future__ import annotations

import dataclasses
import gzip
import logging
from pathlib import Path

import numpy as np
import pytest
from paths import ARRAY, PANEL, TARGET_PHASED, TARGET_TRUTH, TARGET_UNPHASED

from genimpute import panel as panel_module
from genimpute.errors import CheckpointError, InputError, PanelMismatchError
from genimpute.io.array_list import read_array_list
from genimpute.io.vcf_reader import read_target
from genimpute.panel import ReferencePanel, align_target, alt_counts, array_typed_mask, convert_to_compact

ARRAY_FIELDS = ("contig_index", "positions", "packed", "alt_freq", "centimorgans")
LIST_FIELDS = ("samples", "contig_names", "ids", "refs", "alts")


@pytest.fixture(scope="module")
def panel() -> ReferencePanel:
    return ReferencePanel.from_vcf(PANEL)


@pytest.fixture(scope="module")
def saved(panel, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("panel") / "panel.npz"
    panel.save(path)
    return path


def _copy(panel: ReferencePanel, **changes) -> ReferencePanel:
    fields = {f.name: getattr(panel, f.name) for f in dataclasses.fields(panel)}
    fields = {k: (v.copy() if isinstance(v, np.ndarray) else list(v)) for k, v in fields.items()}
    fields.update(changes)
    return ReferencePanel(**fields)


def _vcf_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as handle:
        return handle.read().splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _panel_snp_rows_at(panel: ReferencePanel, positions: set) -> set:
    return {
        i
        for i in range(len(panel))
        if int(panel.positions[i]) in positions and len(panel.refs[i]) == 1 and len(panel.alts[i]) == 1
    }


# --------------------------------------------------------------------------
# the store
# --------------------------------------------------------------------------


def test_from_vcf_layout(panel):
    assert len(panel) == 1258
    assert panel.contig_names == ["20"]
    assert panel.contig_index.dtype == np.int32 and not panel.contig_index.any()
    assert panel.n_haplotypes == 2 * len(panel.samples)
    assert panel.packed.shape == (1258, (panel.n_haplotypes + 7) // 8)
    assert np.all(np.diff(panel.positions) >= 0)


def test_from_vcf_several_contigs(tmp_path):
    path = _write(
        tmp_path / "two.vcf",
        [
            "##fileformat=VCFv4.2",
            "##contig=<ID=20>",
            "##contig=<ID=chrX>",
            '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
            "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tA\tB",
            "20\t100\trs1\tA\tG\t.\t.\t.\tGT\t0|1\t1|1",
            "20\t200\t.\tC\tT\t.\t.\t.\tGT\t0|0\t0|1",
            "chrX\t50\t.\tG\tA\t.\t.\t.\tGT\t1|1\t1|0",
        ],
    )
    panel = ReferencePanel.from_vcf(path)
    assert panel.contig_names == ["20", "chrX"]
    assert panel.contig_index.tolist() == [0, 0, 1]
    assert [panel.contig_key(i) for i in range(2)] == ["20", "X"]
    assert panel.ids == ["rs1", ".", "."]
    np.testing.assert_allclose(panel.alt_freq, [0.75, 0.25, 0.75])
    # round trip through the store keeps the contig layout
    panel.save(tmp_path / "two.npz")
    loaded = ReferencePanel.load(tmp_path / "two.npz")
    assert loaded.contig_names == ["20", "chrX"]
    assert loaded.contig_index.tolist() == [0, 0, 1]
    assert loaded.fingerprint() == panel.fingerprint()


def test_save_load_round_trip(panel, saved):
    loaded = ReferencePanel.load(saved)
    for name in ARRAY_FIELDS:
        original, restored = getattr(panel, name), getattr(loaded, name)
        assert restored.dtype == original.dtype, name
        assert restored.shape == original.shape, name
        np.testing.assert_array_equal(restored, original, err_msg=name)
    for name in LIST_FIELDS:
        assert getattr(loaded, name) == getattr(panel, name), name
    assert loaded.fingerprint() == panel.fingerprint()
    assert len(loaded) == len(panel) and loaded.n_haplotypes == panel.n_haplotypes


def test_a_panel_converted_through_a_spool_is_the_panel_of_its_vcf(panel, tmp_path):
    converted = convert_to_compact(PANEL, tmp_path / "panel.gpanel")
    assert converted.fingerprint() == panel.fingerprint()
    np.testing.assert_array_equal(converted.alt_freq, panel.alt_freq)
    assert [p.name for p in tmp_path.iterdir()] == ["panel.gpanel"]  # neither spool nor partial file left


def test_a_conversion_logs_the_records_read_as_it_goes(tmp_path, monkeypatch, caplog):
    def logged_counts(every: int) -> list:
        monkeypatch.setattr(panel_module.ShownSpool, "LOG_EVERY", every)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="genimpute.panel"):
            convert_to_compact(PANEL, tmp_path / "panel.gpanel", force=True, progress=True)
        return [int(r.getMessage().split()[1]) for r in caplog.records if r.getMessage().startswith("read ")]

    counts = logged_counts(100)  # 1,258 records, read in blocks
    assert counts and counts == sorted(set(counts)) and counts[-1] <= 1258
    assert all(c >= 100 * (i + 1) for i, c in enumerate(counts))
    assert logged_counts(10_000) == []


def test_save_writes_exactly_the_given_path(panel, tmp_path):
    path = tmp_path / "panel.bin"  # no .npz suffix added
    panel.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["panel.bin"]
    assert ReferencePanel.load(path).fingerprint() == panel.fingerprint()


def test_fingerprint_is_deterministic(panel):
    assert ReferencePanel.from_vcf(PANEL).fingerprint() == panel.fingerprint()
    assert _copy(panel).fingerprint() == panel.fingerprint()
    assert len(panel.fingerprint()) == 64


@pytest.mark.parametrize("record, haplotype", [(0, 0), (700, 123), (1257, 397)])
def test_fingerprint_changes_with_one_haplotype_bit(panel, record, haplotype):
    packed = panel.packed.copy()
    packed[record, haplotype // 8] ^= np.uint8(1 << (7 - haplotype % 8))
    changed = _copy(panel, packed=packed)
    diff = changed.haplotypes(np.arange(len(panel))) != panel.haplotypes(np.arange(len(panel)))
    assert np.argwhere(diff).tolist() == [[record, haplotype]]  # exactly that one allele differs
    assert changed.fingerprint() != panel.fingerprint()


def test_fingerprint_changes_with_sites_and_samples(panel):
    base = panel.fingerprint()
    positions = panel.positions.copy()
    positions[10] += 1
    assert _copy(panel, positions=positions).fingerprint() != base
    alts = list(panel.alts)
    alts[5] = "N"
    assert _copy(panel, alts=alts).fingerprint() != base
    samples = list(panel.samples)
    samples[0] = "someone-else"
    assert _copy(panel, samples=samples).fingerprint() != base


def test_alt_freq_is_mean_of_haplotypes(panel):
    haps = np.unpackbits(panel.packed, axis=1, count=panel.n_haplotypes)
    assert panel.alt_freq.dtype == np.float32
    assert panel.alt_freq.shape == (len(panel),)
    np.testing.assert_allclose(panel.alt_freq, haps.mean(axis=1), rtol=1e-6, atol=0)
    assert 0 < panel.alt_freq.max() <= 1


@pytest.mark.parametrize("n_haplotypes", [1, 7, 8, 13, 64])
@pytest.mark.parametrize("block_bytes", [1, 3, 1 << 20])
def test_alt_counts_are_the_unpacked_sums_block_by_block(n_haplotypes, block_bytes):
    haplotypes = (np.random.default_rng(n_haplotypes).random((11, n_haplotypes)) < 0.4).astype(np.uint8)
    haplotypes[0] = 1  # every bit of every byte, the padding's aside
    counts = alt_counts(np.packbits(haplotypes, axis=1), block_bytes)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, haplotypes.sum(axis=1))


def test_haplotypes_of_rows(panel):
    full = np.unpackbits(panel.packed, axis=1, count=panel.n_haplotypes)
    rows = np.array([5, 0, 1257, 5, 640])
    haps = panel.haplotypes(rows)
    assert haps.shape == (5, panel.n_haplotypes) and haps.dtype == np.uint8
    np.testing.assert_array_equal(haps, full[rows])
    mask = np.zeros(len(panel), bool)
    mask[[3, 9, 1000]] = True
    np.testing.assert_array_equal(panel.haplotypes(mask), full[[3, 9, 1000]])
    np.testing.assert_array_equal(panel.haplotypes(np.arange(len(panel))), full)


def test_load_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="missing"):
        ReferencePanel.load(tmp_path / "panel.npz")


def test_load_garbage_file(tmp_path):
    path = tmp_path / "panel.npz"
    path.write_text("definitely not a panel\n")
    with pytest.raises(CheckpointError, match="corrupted"):
        ReferencePanel.load(path)


def test_load_npz_without_haplotypes(tmp_path, panel):
    path = tmp_path / "panel.npz"
    with open(path, "wb") as handle:
        np.savez(handle, positions=panel.positions)
    with pytest.raises(CheckpointError, match="corrupted"):
        ReferencePanel.load(path)


@pytest.mark.parametrize("keep", [0.5, 0.99, 0.0])
def test_load_truncated_file_raises_checkpoint_error(saved, tmp_path, keep):
    data = saved.read_bytes()
    path = tmp_path / "truncated.npz"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError) as info:
        ReferencePanel.load(path)
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------


def test_array_typed_mask_is_panel_snps_at_array_positions(panel):
    array_positions = {int(line.split("\t")[1]) for line in ARRAY.read_text().splitlines()}
    mask = array_typed_mask(panel, read_array_list(ARRAY))
    assert mask.dtype == bool and mask.shape == (len(panel),)
    expected = _panel_snp_rows_at(panel, array_positions)
    assert set(np.nonzero(mask)[0].tolist()) == expected
    assert mask.sum() == 72
    # three array positions have no panel record
    assert len(array_positions - set(panel.positions.tolist())) == 3


def test_array_typed_mask_skips_indels_at_bare_positions(panel, tmp_path):
    indel = next(i for i in range(len(panel)) if len(panel.refs[i]) > 1 or len(panel.alts[i]) > 1)
    snp = next(i for i in range(len(panel)) if len(panel.refs[i]) == 1 and len(panel.alts[i]) == 1)
    pos_indel, pos_snp = int(panel.positions[indel]), int(panel.positions[snp])
    sites = read_array_list(_write(tmp_path / "a.txt", [f"20 {pos_snp}", f"20 {pos_indel}"]))
    mask = array_typed_mask(panel, sites)
    assert set(np.nonzero(mask)[0].tolist()) == _panel_snp_rows_at(panel, {pos_snp, pos_indel})
    assert not mask[indel] and mask[snp]


def test_array_typed_mask_with_alleles_types_only_that_record(panel, tmp_path):
    indel = next(i for i in range(len(panel)) if len(panel.refs[i]) > 1)
    snp = next(i for i in range(len(panel)) if len(panel.refs[i]) == 1 and len(panel.alts[i]) == 1)
    lines = [
        f"20 {panel.positions[indel]} {panel.refs[indel].lower()} {panel.alts[indel]}",
        f"20 {panel.positions[snp]} {panel.alts[snp]} {panel.refs[snp]}",  # swapped alleles: no match
    ]
    mask = array_typed_mask(panel, read_array_list(_write(tmp_path / "a.txt", lines)))
    assert np.nonzero(mask)[0].tolist() == [indel]


def test_array_on_another_contig(panel, tmp_path):
    lines = [line.replace("20\t", "21\t", 1) for line in ARRAY.read_text().splitlines()]
    sites = read_array_list(_write(tmp_path / "a.txt", lines))
    with pytest.raises(PanelMismatchError, match="none of 75"):
        array_typed_mask(panel, sites)


def test_array_with_chr_prefix_matches(panel, tmp_path):
    lines = ["chr" + line for line in ARRAY.read_text().splitlines()]
    sites = read_array_list(_write(tmp_path / "a.txt", lines))
    np.testing.assert_array_equal(array_typed_mask(panel, sites), array_typed_mask(panel, read_array_list(ARRAY)))


# --------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------


def test_align_target_phased(panel):
    target = read_target(TARGET_PHASED)
    aln = align_target(panel, target)
    assert len(aln.panel_rows) == len(target.records) == 72
    assert np.all(np.diff(aln.panel_rows) > 0)
    assert sorted(aln.target_rows.tolist()) == list(range(72))
    assert aln.unmatched_rows.tolist() == []
    assert aln.contigs == [0]
    # matched records really are the same sites
    np.testing.assert_array_equal(panel.positions[aln.panel_rows], target.records.positions[aln.target_rows])
    assert [panel.refs[p] for p in aln.panel_rows] == [target.records.refs[t] for t in aln.target_rows]
    assert [panel.alts[p] for p in aln.panel_rows] == [target.records.alts[t] for t in aln.target_rows]
    # the typed records are the array's SNPs
    mask = array_typed_mask(panel, read_array_list(ARRAY))
    assert aln.panel_rows.tolist() == np.nonzero(mask)[0].tolist()
    # haplotypes are the target's own alleles, not the panel's
    assert aln.haplotypes.dtype == np.int8 and aln.haplotypes.shape == (72, 20)
    np.testing.assert_array_equal(aln.haplotypes, target.alleles[aln.target_rows])
    truth = read_target(TARGET_TRUTH)  # truth has one record per panel record
    np.testing.assert_array_equal(aln.haplotypes, truth.alleles[aln.panel_rows])


def test_align_target_unphased_is_flagged_for_phasing(panel):
    unphased = align_target(panel, read_target(TARGET_UNPHASED), source="chip.vcf")
    phased = align_target(panel, read_target(TARGET_PHASED))
    assert not unphased.phased and phased.phased
    np.testing.assert_array_equal(unphased.panel_rows, phased.panel_rows)
    # the same genotypes, whatever the order of the alleles
    np.testing.assert_array_equal(unphased.haplotypes[:, 0::2] + unphased.haplotypes[:, 1::2],
                                  phased.haplotypes[:, 0::2] + phased.haplotypes[:, 1::2])


def _target_lines(contig: str | None = None) -> list[str]:
    lines = _vcf_lines(TARGET_PHASED)
    if contig is None:
        return lines
    out = []
    for line in lines:
        if line.startswith("##contig=<ID=20,"):
            line = line.replace("ID=20,", f"ID={contig},")
        elif not line.startswith("#"):
            line = contig + line[line.index("\t"):]
        out.append(line)
    return out


def test_align_target_on_another_contig(panel, tmp_path):
    path = _write(tmp_path / "t21.vcf", _target_lines("21"))
    target = read_target(path)
    assert set(target.records.contigs) == {"21"} and len(target.records) == 72
    with pytest.raises(PanelMismatchError, match="contigs") as info:
        align_target(panel, target)
    assert "21" in str(info.value)


def test_align_target_with_chr_prefix(panel, tmp_path):
    target = read_target(_write(tmp_path / "tchr.vcf", _target_lines("chr20")))
    aln = align_target(panel, target)
    reference = align_target(panel, read_target(TARGET_PHASED))
    np.testing.assert_array_equal(aln.panel_rows, reference.panel_rows)
    np.testing.assert_array_equal(aln.haplotypes, reference.haplotypes)


def test_align_target_unmatched_records_pass_through(panel, tmp_path):
    lines = _target_lines()
    header = [line for line in lines if line.startswith("#")]
    body = [line.split("\t") for line in lines if not line.startswith("#")]
    panel_positions = set(panel.positions.tolist())
    n_samples = len(body[0]) - 9
    # 1. a record whose ALT differs from the panel's
    body[3][4] = "A" if body[3][4] != "A" and body[3][3] != "A" else "C"
    # 2. a multi-allelic record: its first ALT is the panel's, so it is used, as the split record
    body[10][4] = body[10][4] + ",N"
    # 3. a record at a position with no panel record; unphased hets there are not an error
    new_pos = next(p for p in range(int(body[20][1]) + 1, int(body[21][1])) if p not in panel_positions)
    body.insert(21, ["20", str(new_pos), ".", "A", "G", ".", ".", ".", "GT"] + ["0/1"] * n_samples)
    path = _write(tmp_path / "extra.vcf", header + ["\t".join(fields) for fields in body])
    target = read_target(path)
    assert len(target.records) == 73
    aln = align_target(panel, target)
    assert aln.unmatched_rows.tolist() == [3, 21]
    assert len(aln.panel_rows) == 71
    assert sorted(set(aln.target_rows.tolist()) | {3, 21}) == list(range(73))
    assert np.all(np.diff(aln.panel_rows) > 0)
    np.testing.assert_array_equal(aln.haplotypes, target.alleles[aln.target_rows])
    decisions = {d.target_row: d.decision for d in aln.decisions}
    assert (decisions[3], decisions[10], decisions[21]) == ("allele-mismatch", "split", "not-in-panel")


def test_align_target_without_shared_records(panel, tmp_path):
    lines = [
        "\t".join(f[:3] + [f[3], "N"] + f[5:]) if not f[0].startswith("#") else "\t".join(f)
        for f in (line.split("\t") for line in _target_lines())
    ]
    target = read_target(_write(tmp_path / "none.vcf", lines))
    with pytest.raises(PanelMismatchError, match="72 of 72 .* match neither"):
        align_target(panel, target)


def test_align_target_duplicate_records(panel, tmp_path):
    lines = _target_lines()
    first = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    lines.insert(first + 1, lines[first])
    target = read_target(_write(tmp_path / "dup.vcf", lines))
    aln = align_target(panel, target)
    # the first copy is evidence; the second is passed through, as written
    assert aln.unmatched_rows.tolist() == [1] and aln.target_rows[0] == 0
    assert [d.decision for d in aln.decisions[:2]] == ["match", "duplicate"]


def test_genetic_positions_are_1_cm_per_mb_without_a_map(panel):
    np.testing.assert_allclose(panel.centimorgans, panel.positions * 1e-6)


def test_a_genetic_map_places_records_linearly_and_1_cm_per_mb_beyond_it(panel, tmp_path):
    first, last = int(panel.positions[0]), int(panel.positions[-1])
    middle = (first + last) // 2
    path = tmp_path / "chr20.map"  # PLINK, contig named as the panel's (20) with a chr prefix
    path.write_text(f"chr20\t.\t10.0\t{first + 1000}\nchr20\t.\t10.5\t{middle}\n")
    cm = panel.with_genetic_map(path).centimorgans
    inside = (panel.positions >= first + 1000) & (panel.positions <= middle)
    expected = 10.0 + 0.5 * (panel.positions[inside] - (first + 1000)) / (middle - first - 1000)
    np.testing.assert_allclose(cm[inside], expected)
    before, after = panel.positions < first + 1000, panel.positions > middle
    np.testing.assert_allclose(cm[before], 10.0 - (first + 1000 - panel.positions[before]) * 1e-6)
    np.testing.assert_allclose(cm[after], 10.5 + (panel.positions[after] - middle) * 1e-6)
    assert panel.centimorgans[0] == pytest.approx(first * 1e-6)  # the panel itself is left as it was


def test_genetic_positions_survive_save_and_load(panel, tmp_path):
    path = tmp_path / "chr20.map"
    path.write_text(f"20\t.\t1.0\t{int(panel.positions[0])}\n20\t.\t3.0\t{int(panel.positions[-1])}\n")
    mapped = panel.with_genetic_map(path)
    mapped.save(tmp_path / "panel.npz")
    np.testing.assert_array_equal(ReferencePanel.load(tmp_path / "panel.npz").centimorgans, mapped.centimorgans)


def test_a_genetic_map_without_the_panels_contig_is_an_error(panel, tmp_path):
    path = tmp_path / "chr21.map"
    path.write_text("21\t.\t0.0\t9000000\n21\t.\t1.0\t10000000\n")
    with pytest.raises(InputError, match="contig 20"):
        panel.with_genetic_map(path)
