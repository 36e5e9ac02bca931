"""Bit rows kept whole or as lists of their rarer bit (genimpute.io.sparse_rows)."""

from __future__ import annotations

import numpy as np
import pytest
from paths import PANEL

from genimpute.errors import CheckpointError
from genimpute.io.file_rows import npz_rows, write_npz
from genimpute.io.sparse_rows import SparseRows, SparseSpool, listed_rows, ones_in_rows, row_parts
from genimpute.panel import COMPACT_FORMAT, ReferencePanel, alt_counts, read_reference


def _rows(n_bits: int, seed: int = 1) -> np.ndarray:
    """Packed rows of n_bits bits: rare 1s, rare 0s, all 0, all 1, half and half."""
    rng = np.random.default_rng(seed)
    freqs = np.r_[rng.random(40) ** 6, 1 - rng.random(20) ** 6, 0, 1, 0.5]
    return np.packbits(rng.random((len(freqs), n_bits)) < freqs[:, None], axis=1)


@pytest.fixture
def spool(tmp_path):
    with SparseSpool(tmp_path) as spool:
        yield spool


def _spooled(spool: SparseSpool, rows: np.ndarray, cuts=(0, 30, 30)) -> SparseRows:
    """The rows appended in blocks cut at `cuts` (an empty one among them), read back."""
    for a, b in zip((*cuts, len(rows))[:-1], (*cuts, len(rows))[1:]):
        spool.append(rows[a:b])
    return spool.rows()


@pytest.mark.parametrize("n_bits", [1, 8, 63, 65, 1001])
def test_spooled_rows_read_back_bit_for_bit_however_indexed(spool, n_bits):
    rows = _rows(n_bits)
    sparse = _spooled(spool, rows)
    np.testing.assert_array_equal(sparse[:], rows)
    order = np.random.default_rng(2).permutation(len(rows))[:40]
    np.testing.assert_array_equal(sparse[order], rows[order])
    np.testing.assert_array_equal(sparse[::3], rows[::3])
    np.testing.assert_array_equal(sparse[7], rows[7])
    np.testing.assert_array_equal(sparse[-1], rows[-1])
    np.testing.assert_array_equal(sparse[rows[:, 0] > 0], rows[rows[:, 0] > 0])
    np.testing.assert_array_equal(sparse.ones(), ones_in_rows(rows))


def test_a_row_is_listed_only_where_its_list_is_shorter_than_the_row(spool):
    rows = _rows(1001)
    sparse = _spooled(spool, rows)
    ones = ones_in_rows(rows)
    rarer = np.minimum(ones, 8 * rows.shape[1] - ones)
    listed = sparse.whole_at < 0
    np.testing.assert_array_equal(listed, 4 * rarer < rows.shape[1])
    np.testing.assert_array_equal(listed, listed_rows(ones, rows.shape[1]))
    assert listed.any() and (~listed).any()
    assert len(sparse.whole) == np.count_nonzero(~listed) and len(sparse.positions) == rarer[listed].sum()
    np.testing.assert_array_equal(sparse.ones_listed[listed], 2 * ones[listed] <= 8 * rows.shape[1])


def test_a_row_of_rare_zeros_lists_its_padding_and_comes_back_with_it_zero(spool):
    """1,597 bits in 200 bytes: 3 bits of padding, listed with the row's two 0s."""
    bits = np.ones((1, 200 * 8 - 3), dtype=np.uint8)
    bits[0, [5, 77]] = 0
    rows = np.packbits(bits, axis=1)
    sparse = _spooled(spool, rows, cuts=(0,))
    assert sparse.whole_at[0] == -1 and not sparse.ones_listed[0]
    assert sparse.positions[:].ravel().tolist() == [5, 77, 1597, 1598, 1599]
    np.testing.assert_array_equal(sparse[:], rows)


def test_parts_keep_each_rows_own_positions_in_the_rows_order(spool):
    rows = _rows(1001)
    sparse = _spooled(spool, rows)
    wanted = np.array([3, 4, 5, 10, 45, 2, 61])
    parts = row_parts(sparse, wanted)
    for i, r in enumerate(wanted):
        bits = np.unpackbits(rows[r])
        if parts.whole_at[i] >= 0:
            np.testing.assert_array_equal(parts.whole[parts.whole_at[i]], rows[r])
        else:
            listed = parts.positions[parts.starts[i]:parts.starts[i + 1]]
            np.testing.assert_array_equal(listed, np.flatnonzero(bits == parts.ones_listed[i]))
    whole = row_parts(rows, wanted)  # an array's rows are all whole
    np.testing.assert_array_equal(whole.whole, rows[wanted])
    assert (whole.whole_at >= 0).all() and whole.starts[-1] == 0


def test_rows_out_of_range_are_refused_and_negative_ones_count_from_the_end(spool):
    rows = _rows(1001)
    sparse = _spooled(spool, rows)
    with pytest.raises(IndexError, match="out of range"):
        sparse[np.array([0, len(sparse)])]
    ends = row_parts(sparse, np.array([-1, -3]))
    np.testing.assert_array_equal(ends.ones_listed, sparse.ones_listed[[-1, -3]])
    np.testing.assert_array_equal(np.diff(ends.starts), np.diff(sparse.starts)[[-1, -3]])


def test_a_compact_panels_listed_rows_read_in_any_order_from_the_file(tmp_path):
    panel = ReferencePanel.from_vcf(PANEL)
    panel.save(tmp_path / "panel.gpanel")
    loaded = read_reference(tmp_path / "panel.gpanel")
    order = np.random.default_rng(3).permutation(len(panel))[:300]
    np.testing.assert_array_equal(loaded.packed[order], panel.packed[order])
    parts = row_parts(loaded.packed, order)
    listed = np.flatnonzero(parts.whole_at < 0)
    assert len(listed) > 100
    for i in listed[:50]:
        bits = np.unpackbits(panel.packed[order[i]])
        np.testing.assert_array_equal(parts.positions[parts.starts[i]:parts.starts[i + 1]],
                                      np.flatnonzero(bits == parts.ones_listed[i]))


@pytest.mark.parametrize("value", [405, 4_000_000_000])  # within the rows' bytes but not its row; beyond them all
def test_a_corrupted_position_is_an_error_not_a_write_elsewhere(tmp_path, value):
    panel = ReferencePanel.from_vcf(PANEL)
    path = tmp_path / "panel.gpanel"
    panel.save(path)
    member = npz_rows(path, "listed_gaps")
    varint = []
    while value >= 128:
        varint, value = varint + [value & 127 | 128], value >> 7
    with open(path, "r+b") as handle:  # the first listed position's gap, and the bytes after it as it needs
        handle.seek(member.offset)
        handle.write(bytes(varint + [value]))
    loaded = read_reference(path)
    with pytest.raises(CheckpointError, match="corrupted"):  # beyond its row, or the rows' count of positions off
        loaded.packed[:]


def test_rows_numbered_out_of_order_are_refused():
    with pytest.raises(ValueError, match="numbered in order"):
        SparseRows(np.zeros((2, 2), np.uint8), np.zeros((0, 1), np.uint32), np.array([1, 0]), np.zeros(3, np.int64),
                   np.zeros(2, bool))


def test_a_reset_spool_drops_the_rows_appended(tmp_path):
    rows = _rows(1001)
    with SparseSpool(tmp_path) as spool:
        spool.append(rows[:10])
        spool.reset()
        spool.append(rows[10:])
        np.testing.assert_array_equal(spool.rows()[:], rows[10:])
        assert len(spool) == len(rows) - 10


def test_a_compact_panels_records_take_less_than_packed_and_read_as_the_vcfs(tmp_path):
    panel = ReferencePanel.from_vcf(PANEL)
    path = tmp_path / "panel.gpanel"
    panel.save(path)
    loaded = read_reference(path)
    np.testing.assert_array_equal(loaded.packed[:], panel.packed)
    np.testing.assert_array_equal(alt_counts(loaded.packed), alt_counts(panel.packed))
    kept = loaded.packed
    assert len(kept.whole) * kept.shape[1] + 4 * len(kept.positions) < 0.6 * panel.packed.nbytes


def test_a_format_1_panel_with_its_records_whole_is_read_still(tmp_path):
    panel = ReferencePanel.from_vcf(PANEL)
    path = tmp_path / "old.gpanel"
    with open(path, "wb") as handle:  # format 1's members: the records whole, as "packed"
        write_npz(handle, dict(
            format=np.array("genimpute-panel/1"), samples=np.frombuffer("\n".join(panel.samples).encode(), np.uint8),
            contig_names=np.frombuffer("\n".join(panel.contig_names).encode(), np.uint8),
            contig_index=panel.contig_index, positions=panel.positions,
            ids=np.frombuffer("\n".join(panel.ids).encode(), np.uint8),
            refs=np.frombuffer("\n".join(panel.refs).encode(), np.uint8),
            alts=np.frombuffer("\n".join(panel.alts).encode(), np.uint8),
            alt_freq=panel.alt_freq, centimorgans=panel.centimorgans,
        ), dict(packed=(panel.packed.shape, np.uint8, [panel.packed])))
    loaded = read_reference(path)
    assert loaded.fingerprint() == panel.fingerprint()
    again = tmp_path / "new.gpanel"
    loaded.save(again)  # saved again, in the format written now
    with np.load(again) as z:
        assert str(z["format"]) == COMPACT_FORMAT and "packed" not in z
    assert read_reference(again).fingerprint() == panel.fingerprint()
