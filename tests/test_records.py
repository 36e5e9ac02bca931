"""The output records' assembly: the engine's probabilities gathered into
each chunk's rows."""

import numpy as np

from genimpute.records import TILE, _gather_rows


def test_gathered_rows_of_a_transposed_view_are_its_rows_placed_at_their_destinations():
    rng = np.random.default_rng(3)
    n_haplotypes, n_records = 2 * TILE + 3, 3 * TILE + 5  # whole columns and a ragged one; records past a multiple of TILE
    probs = rng.random((n_haplotypes, n_records), dtype=np.float32).T  # (U, Q), as the copying engine returns it
    sources = rng.choice(n_records, size=TILE + 9, replace=False)
    destinations = np.sort(rng.choice(2 * TILE, size=len(sources), replace=False))
    out = np.full((2 * TILE, n_haplotypes), -1, dtype=np.float32)
    _gather_rows(probs, sources, destinations, out)
    expected = np.full(out.shape, -1, dtype=np.float32)
    expected[destinations] = probs[sources]
    np.testing.assert_array_equal(out, expected)
