"""benchmarks/experiments/switch_scales.py: a scale's settings make the copying
model's switch length that many times the default's, and the scales are
compared on samples imputed over every segment of the contig."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from test_copying import _panel

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks" / "experiments"))
from switch_scales import dosages, scaled_settings  # noqa: E402

from genimpute.config import CopyingSettings  # noqa: E402
from genimpute.copying import ContigModel  # noqa: E402


@pytest.mark.parametrize("scale", [0.1, 0.5, 2.0, 4.0])
@pytest.mark.parametrize("n_haplotypes, site_cm", [(200, 0.01), (2_000, 0.0025), (64_000, 1e-4)])
def test_a_scale_multiplies_the_default_switch_length(scale, n_haplotypes, site_cm):
    default = CopyingSettings().switch_cm(n_haplotypes, site_cm)
    assert scaled_settings(scale).switch_cm(n_haplotypes, site_cm) == pytest.approx(scale * default)


def test_dosages_are_the_segments_in_order_each_sample_summed():
    rng = np.random.default_rng(4)
    alleles = rng.integers(0, 2, (400, 40)).astype(np.uint8)
    typed = np.zeros(400, dtype=bool)
    typed[::2] = True
    model = ContigModel(_panel(alleles), 0, typed, CopyingSettings(segment_sites=60, margin_sites=10))
    segments = model.segments()
    assert len(segments) == 4
    excluded = np.repeat(np.arange(3), 2)
    found = dosages(model, alleles[:, :6], excluded)
    queries = alleles[model.typed_rows][:, :6].astype(np.int8)
    for segment, rows in zip(segments, np.split(found, np.cumsum([len(s.predicted) for s in segments])[:-1])):
        p = model.probabilities(segment, queries, excluded)[0]
        np.testing.assert_allclose(rows, p[:, 0::2] + p[:, 1::2], rtol=1e-6)
    assert len(found) == (~typed).sum()
