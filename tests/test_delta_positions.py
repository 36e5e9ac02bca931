"""Listed rows' positions kept as varint gaps (genimpute.io.delta_positions):
every row's positions come back, whatever the gaps' sizes, for any rows
asked in any order."""

import numpy as np
import pytest

from genimpute.io.delta_positions import ROWS_PER_BLOCK, DeltaPositions
from genimpute.io.file_rows import RowSpool


def _rows(rng, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions (P,) uint32, counts (n + 1,)): rows of 0 to 40 ascending
    positions, some with gaps of 1, some beyond 2^28 (a varint's 5 bytes)."""
    rows = []
    for _ in range(n_rows):
        m = int(rng.integers(0, 41))
        spread = int(rng.choice([2 * m + 1, 200_000, 4_000_000_000]))
        rows.append(np.sort(rng.choice(spread, size=min(m, spread), replace=False)).astype(np.uint32))
    counts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=counts[1:])
    return np.concatenate(rows), counts


@pytest.fixture
def code(tmp_path):
    """DeltaPositions.code into a spool of tmp_path, open for the test."""
    with RowSpool(tmp_path) as spool:
        yield lambda positions, counts: DeltaPositions.code(positions, counts, spool)


def test_every_row_comes_back_in_any_order_asked(code):
    positions, counts = _rows(np.random.default_rng(2), 300)
    coded = code(positions.reshape(-1, 1), counts)
    assert len(coded) == len(positions) and len(coded.data) < positions.nbytes
    np.testing.assert_array_equal(coded.decoded().ravel(), positions)
    for rows in (np.array([5, 3, 3, 299, 0]), np.arange(100, 200), np.array([], dtype=np.int64)):
        wanted = np.concatenate([positions[counts[r]:counts[r + 1]] for r in rows]) if len(rows) else []
        np.testing.assert_array_equal(coded.spans(rows), wanted)


def test_rows_coded_in_several_blocks_number_their_bytes_across_them(monkeypatch, code):
    import genimpute.io.delta_positions as delta

    positions, counts = _rows(np.random.default_rng(3), 50)
    monkeypatch.setattr(delta, "ROWS_PER_BLOCK", 7)
    assert delta.ROWS_PER_BLOCK < ROWS_PER_BLOCK
    np.testing.assert_array_equal(code(positions, counts).decoded().ravel(), positions)


def test_byte_starts_that_do_not_end_at_the_data_are_refused(code):
    positions, counts = _rows(np.random.default_rng(4), 10)
    coded = code(positions, counts)
    with pytest.raises(ValueError, match="byte starts"):
        DeltaPositions(coded.data[:-1], coded.byte_starts, counts)
