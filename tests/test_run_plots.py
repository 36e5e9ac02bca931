"""The QC page's figures (genimpute.run_plots) as SVG: each one well-formed
XML, its marks the data's (the histograms' bars the counts numpy finds, the
DR2 bars the shares, one mark per site or outlier), a dense cloud drawn in
bounded size, and the page built without loading matplotlib. The
browser test of the page is tests/test_qc_report.py."""

import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from genimpute import run_plots
from genimpute.run_facts import CHI2_OUTLIER, DR2_KEPT

SVG = "{http://www.w3.org/2000/svg}"


def _group(svg_text: str, attribute: str, value: str) -> ET.Element:
    root = ET.fromstring(svg_text)
    assert root.tag == f"{SVG}svg" and float(root.get("width")) > 200 and float(root.get("height")) > 100
    found = [g for g in root.iter(f"{SVG}g") if g.get(attribute) == value]
    assert len(found) == 1, (attribute, value)
    return found[0]


def _frequencies(n: int, outliers: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    panel = rng.uniform(0, 1, n)
    chi2 = np.where(np.arange(n) < outliers, CHI2_OUTLIER + 1 + np.arange(n), 1.0)
    return pd.DataFrame({"target_af": np.clip(panel + rng.normal(0, 0.02, n), 0, 1), "panel_af": panel,
                         "called_alleles": 200, "chi2": chi2})


def test_a_small_array_s_sites_and_outliers_are_one_mark_each():
    svg = run_plots.frequency_scatter(_frequencies(500, 7))
    assert len(_group(svg, "data-points", "sites")) == 493
    assert len(_group(svg, "data-points", "outliers")) == 7
    assert "chi-square &gt; 300 (7)" in svg


def test_a_dense_cloud_is_a_grid_of_shaded_cells_of_bounded_size():
    frequencies = _frequencies(200_000, 5_000)
    svg = run_plots.frequency_scatter(frequencies)
    cells = _group(svg, "data-points", "sites")
    assert 0 < len(cells) <= run_plots.GRID_CELLS ** 2 and all(c.tag == f"{SVG}rect" for c in cells)
    assert max(float(c.get("fill-opacity")) for c in cells) == 1.0  # the fullest cell at full shade
    assert len(_group(svg, "data-points", "outliers")) == run_plots.OUTLIERS_DRAWN
    assert "(5000)" in svg  # the legend counts every outlier, drawn or not
    assert len(svg) < 2_000_000
    drawn_y = sorted(float(c.get("cy")) for c in _group(svg, "data-points", "outliers"))
    worst = frequencies.nlargest(run_plots.OUTLIERS_DRAWN, "chi2")  # the worst are the ones drawn
    axes = run_plots._area(x_range=(0.0, 1.0), y_range=(0.0, 1.0))
    assert np.allclose(drawn_y, np.sort(axes.y(worst["target_af"])), atol=0.06)


def test_the_histograms_bars_are_numpy_s_counts():
    rng = np.random.default_rng(2)
    samples = pd.DataFrame({"call_rate": rng.uniform(0.9, 1, 300), "heterozygosity": rng.normal(0.3, 0.02, 300)})
    samples.loc[3, "heterozygosity"] = np.nan  # a sample with no diploid call
    svg = run_plots.sample_histograms(samples)
    for column, title in (("call_rate", "call rate"), ("heterozygosity", "heterozygosity")):
        values = samples[column].dropna().to_numpy()
        expected, _ = np.histogram(values, bins=min(50, max(5, len(values) // 4)))
        bars = _group(svg, "data-histogram", title)
        assert [float(b.get("data-value")) for b in bars] == list(expected)
        heights = np.array([float(b.get("height")) for b in bars])
        assert np.allclose(heights / heights.max(), expected / expected.max(), atol=0.01)


def test_one_sample_s_histogram_still_has_a_bar_with_a_width():
    svg = run_plots.sample_histograms(pd.DataFrame({"call_rate": [1.0], "heterozygosity": [np.nan]}))
    bars = _group(svg, "data-histogram", "call rate")
    assert sum(float(b.get("data-value")) for b in bars) == 1 and all(float(b.get("width")) > 0 for b in bars)
    assert len(_group(svg, "data-histogram", "heterozygosity")) == 5  # no values: empty bins, no error


@pytest.mark.parametrize("threshold", DR2_KEPT)
def test_the_dr2_bars_are_the_shares_kept(threshold):
    column = f"share_dr2_{threshold:g}"
    quality = pd.DataFrame({"maf_bin": ["[0, 0.001)", "[0.001, 0.005)", "[0.005, 0.01)", "all"],
                            "records": [0, 10, 20, 30], "mean_dr2": [np.nan, 0.5, 0.9, 0.8],
                            "share_dr2_0.3": [np.nan, 0.6, 1.0, 0.9], "share_dr2_0.8": [np.nan, 0.2, 0.7, 0.5]})
    bars = _group(run_plots.dr2_kept(quality), "data-bars", f"dr2_{threshold:g}")
    assert [float(b.get("data-value")) for b in bars] == list(quality[column][1:3])  # no empty bin, no "all"


def test_the_page_is_made_without_matplotlib():
    code = ("import sys, numpy as np, pandas as pd; from genimpute import run_plots, qc_report; "
            "run_plots.frequency_scatter(pd.DataFrame({'target_af': [0.1], 'panel_af': [0.2], 'chi2': [1.0]})); "
            "assert not any(m.startswith('matplotlib') for m in sys.modules), 'matplotlib loaded'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
