"""Bit rows coded in blocks by their distinct columns (genimpute.io.coded_rows):
every row comes back bit for bit, padding included, however it is asked
for, and a block with too many distinct columns is split until each fits."""

import numpy as np
import pytest

from genimpute.io.coded_rows import BLOCK_ROWS, CodedRows, code_block
from genimpute.io.file_rows import RowSpool


def _rows_in_ld(rng, n_rows: int, width: int, founders: int = 5) -> np.ndarray:
    """(n_rows, width) packed rows whose bit columns copy a few founders' in
    runs, as haplotypes in LD do, with the padding bits of the last byte
    set in some rows."""
    founder_bits = rng.integers(0, 2, (n_rows, founders), dtype=np.uint8)
    choice = rng.integers(0, founders, 8 * width)
    choice[rng.random(8 * width) < 0.05] = -1  # a few columns of their own
    bits = np.where(choice >= 0, founder_bits[:, np.clip(choice, 0, None)], rng.integers(0, 2, (n_rows, 8 * width)))
    return np.packbits(bits.astype(np.uint8), axis=1)


@pytest.fixture(scope="module")
def rows():
    return _rows_in_ld(np.random.default_rng(4), 3 * BLOCK_ROWS + 17, 37)


@pytest.fixture
def code(tmp_path):
    """CodedRows.code into spools of tmp_path, open for the test."""
    with RowSpool(tmp_path, np.uint16) as index, RowSpool(tmp_path) as sequences:
        yield lambda rows: CodedRows.code(rows, index, sequences)


def test_rows_come_back_bit_for_bit_however_they_are_asked_for(rows, code):
    coded = code(rows)
    assert coded.shape == rows.shape and len(coded) == len(rows) and len(coded.index) == 4
    mask = np.random.default_rng(1).random(len(rows)) < 0.3
    for asked in (slice(None), slice(5, 300, 7), 130, -1, mask, np.array([400, 3, 3, 128, 127, 0]), np.array([], int)):
        np.testing.assert_array_equal(coded[asked], rows[asked])
    with pytest.raises(IndexError):
        coded[np.array([len(rows)])]


def test_rows_in_ld_take_fewer_bytes_than_the_rows(rows, code):
    coded = code(rows)
    assert coded.index[:].nbytes + coded.sequences[:].nbytes < rows.nbytes
    assert len(coded.sequences) < 8 * rows.shape[1] * len(coded.index)  # columns shared within blocks


def test_a_block_with_too_many_distinct_columns_is_split_until_each_fits(rows):
    block = rows[:BLOCK_ROWS]
    distinct = len(code_block(block)[0].sequences)
    pieces = code_block(block, max_sequences=distinct // 3)
    assert len(pieces) > 1 and sum(p.rows for p in pieces) == BLOCK_ROWS
    assert all(len(p.sequences) <= distinct // 3 for p in pieces)
    starts = np.cumsum([0] + [p.rows for p in pieces])
    coded = CodedRows(np.stack([p.index for p in pieces]), np.concatenate([p.sequences for p in pieces]), starts,
                      np.cumsum([0] + [len(p.sequences) for p in pieces]))
    np.testing.assert_array_equal(coded[:], block)


def test_blocks_that_do_not_add_up_are_refused(rows, code):
    coded = code(rows)
    with pytest.raises(ValueError, match="expected blocks of 1 to BLOCK_ROWS rows"):
        CodedRows(coded.index, coded.sequences[:-1], coded.block_starts, coded.sequence_starts)
    with pytest.raises(ValueError, match="block and sequence starts"):
        CodedRows(coded.index, coded.sequences, coded.block_starts[:-1], coded.sequence_starts)
