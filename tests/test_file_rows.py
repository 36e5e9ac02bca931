"""A .npz array read by rows from its file, and .npz files written with an array streamed in blocks."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest
from paths import PANEL

from genimpute.errors import CheckpointError
from genimpute.io.coded_rows import CodedRows
from genimpute.io.delta_positions import DeltaPositions
from genimpute.io.file_rows import FileRows, npz_rows, packed_blocks, write_npz
from genimpute.io.sparse_rows import SparseRows
from genimpute.panel import ReferencePanel, read_reference

ROWS = np.random.default_rng(3).integers(0, 256, size=(500, 37), dtype=np.uint8)


@pytest.fixture()
def stored(tmp_path):
    path = tmp_path / "rows.npz"
    np.savez(path, small=np.arange(4), rows=ROWS)
    return path


@pytest.mark.parametrize("rows", [
    slice(None), slice(10, 20), slice(480, 600), slice(0, 0), slice(20, 10), slice(-5, None), slice(None, None, 7),
    [5, 3, 3, 499, 0, 1, 2],  # unsorted and repeated
    [0, 1, 2, 3, 200, 201, 499],  # runs of consecutive rows
    [],
])
def test_rows_read_from_the_file_are_those_of_the_array(stored, rows):
    np.testing.assert_array_equal(npz_rows(stored, "rows")[rows if isinstance(rows, slice) else np.array(rows, dtype=int)],
                                  ROWS[rows])


def test_an_integer_or_a_mask_indexes_as_in_numpy(stored):
    rows = npz_rows(stored, "rows")
    np.testing.assert_array_equal(rows[7], ROWS[7])
    mask = ROWS[:, 0] > 100
    np.testing.assert_array_equal(rows[mask], ROWS[mask])
    assert rows.shape == ROWS.shape and len(rows) == len(ROWS) and rows.dtype == ROWS.dtype
    with pytest.raises(IndexError):
        rows[np.array([500])]


def test_streamed_blocks_write_a_file_numpy_reads(tmp_path):
    path = tmp_path / "out.npz"
    with open(path, "wb") as handle:
        write_npz(handle, {"small": np.arange(4)}, {"rows": (ROWS.shape, np.uint8, [ROWS[:123], ROWS[123:]])})
    with np.load(path) as z:
        np.testing.assert_array_equal(z["rows"], ROWS)
        np.testing.assert_array_equal(z["small"], np.arange(4))
    np.testing.assert_array_equal(npz_rows(path, "rows")[[4, 400]], ROWS[[4, 400]])


@pytest.mark.parametrize("blocks", [[ROWS[:100]], [ROWS, ROWS[:1]], [ROWS[:, :5]]])
def test_blocks_that_do_not_fill_the_shape_are_refused(tmp_path, blocks):
    with open(tmp_path / "out.npz", "wb") as handle, pytest.raises(ValueError, match="rows"):
        write_npz(handle, {}, {"rows": (ROWS.shape, np.uint8, blocks)})


def test_a_compressed_member_or_a_file_changed_in_use_is_refused(tmp_path, stored):
    compressed = tmp_path / "compressed.npz"
    np.savez_compressed(compressed, rows=ROWS)
    with pytest.raises(ValueError, match="uncompressed"):
        npz_rows(compressed, "rows")
    rows = npz_rows(stored, "rows")
    with open(stored, "ab") as handle:
        handle.write(b"more")
    with pytest.raises(CheckpointError, match="changed while in use"):
        rows[[1]]


def test_a_truncated_member_is_refused(tmp_path, stored):
    data = stored.read_bytes()
    with zipfile.ZipFile(stored) as archive:
        end = archive.getinfo("rows.npy").header_offset + 200  # inside the rows
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[:end])
    with pytest.raises((ValueError, zipfile.BadZipFile)):
        npz_rows(cut, "rows")


def test_a_compact_panel_reads_its_haplotypes_from_the_file(tmp_path):
    panel = ReferencePanel.from_vcf(PANEL)
    path = tmp_path / "panel.gpanel"
    panel.save(path)
    loaded = read_reference(path)
    assert isinstance(loaded.packed, SparseRows)  # not read whole: its parts are rows of the file
    coded = loaded.packed.whole  # the rows not listed, coded in blocks (genimpute.io.coded_rows)
    assert isinstance(coded, CodedRows) and isinstance(coded.index, FileRows)
    listed = loaded.packed.positions  # the listed rows' positions as gaps (genimpute.io.delta_positions)
    assert isinstance(coded.sequences, FileRows) and isinstance(listed, DeltaPositions)
    assert isinstance(listed.data, FileRows)
    assert 0 < np.count_nonzero(loaded.packed.whole_at < 0) < len(panel)  # some records listed, some whole
    rows = np.array([0, 2, 3, len(panel) - 1])
    np.testing.assert_array_equal(loaded.haplotypes(rows), panel.haplotypes(rows))
    assert loaded.fingerprint() == panel.fingerprint()
    whole = loaded.in_memory()  # for the window models: in memory as kept, rare records listed
    assert isinstance(whole.packed.whole, np.ndarray) and isinstance(whole.packed.positions, np.ndarray)
    assert whole.fingerprint() == panel.fingerprint()
    assert panel.in_memory() is panel
    again = tmp_path / "again.gpanel"
    loaded.save(again)  # a panel read from a file saves as the one read from the VCF
    assert again.read_bytes() == path.read_bytes()
    os.utime(path, ns=(0, 0))
    with pytest.raises(CheckpointError, match="changed while in use"):
        loaded.haplotypes(rows)


def test_a_format_2_compact_panel_reads_as_it_was_written(tmp_path):
    """Format 2 kept the rows that are not listed whole, and the listed
    positions as uint32: such a file (this panel's, rewritten so) reads
    with the same haplotypes."""
    panel = ReferencePanel.from_vcf(PANEL)
    path = tmp_path / "panel.gpanel"
    panel.save(path)
    with np.load(path) as z:
        arrays = {name: z[name] for name in z.files}
    coded = CodedRows(*(arrays.pop(f"whole_{part}") for part in ("index", "sequences", "block_starts",
                                                                  "sequence_starts")))
    listed = DeltaPositions(arrays.pop("listed_gaps"), arrays.pop("listed_byte_starts"), arrays["starts"])
    arrays.update(whole=coded[:], listed=listed.decoded(), format=np.array("genimpute-panel/2"))
    with open(tmp_path / "format2.gpanel", "wb") as handle:  # a path would gain ".npz"
        np.savez(handle, **arrays)
    loaded = read_reference(tmp_path / "format2.gpanel")
    assert isinstance(loaded.packed.whole, FileRows)
    every = np.arange(len(panel))
    np.testing.assert_array_equal(loaded.haplotypes(every), panel.haplotypes(every))


@pytest.mark.parametrize("rows", [None, np.array([0, 2, 3, 7, 8, 9, 12, 499])])
def test_packed_blocks_give_the_rows_in_blocks_of_the_size_asked(stored, rows):
    for source in (ROWS, npz_rows(stored, "rows")):
        blocks = list(packed_blocks(source, block_bytes=3 * 37, rows=rows))  # three 37-byte rows a block
        assert [len(b) for b in blocks[:-1]] == [3] * (len(blocks) - 1) and 0 < len(blocks[-1]) <= 3
        np.testing.assert_array_equal(np.concatenate(blocks), ROWS if rows is None else ROWS[rows])
