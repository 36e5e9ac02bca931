"""The QC page beside every impute output, and evaluate's page, opened in
a real browser (headless Chromium through Playwright): every section and
figure renders with a size, and the counts on the page are the run's (its
--audit TSV and summary line; evaluate's report.json)."""

import csv
import json
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import vcf_edit
from genome_example import make_genome_example
from paths import DATA, PANEL, TARGET_PHASED, TARGET_TRUTH
from PIL import Image
from playwright.sync_api import sync_playwright
from tools import require

from genimpute import run_plots

SECTIONS = ("run", "inputs", "frequencies", "samples", "imputation")
FIGURES = ("af_scatter", "sample_histograms", "dr2_kept")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _impute(target, out, *args):
    result = subprocess.run([sys.executable, "-m", "genimpute", "-q", "impute", str(target), "--ref", str(PANEL),
                             "--out", str(out), *map(str, args)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def browser():
    require("chromium")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _open(browser, path, screenshot):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(path.resolve().as_uri())
    page.screenshot(path=str(screenshot), full_page=True)
    return page


def _count(page, key) -> str:
    return page.locator(f'[data-count="{key}"]').inner_text().strip()


def _audit(path) -> Counter:
    with open(path) as handle:
        return Counter(row["decision"] for row in csv.DictReader(handle, delimiter="\t"))


def test_the_page_renders_with_the_run_s_counts(browser, tmp_path):
    out, audit = tmp_path / "imputed.vcf.gz", tmp_path / "audit.tsv"
    summary = _impute(TARGET_PHASED, out, "--audit", audit, "--validate").stdout
    page = _open(browser, tmp_path / "imputed.html", tmp_path / "page.png")
    for section in SECTIONS:
        box = page.locator(f"#{section}").bounding_box()
        assert box and box["height"] > 50 and box["width"] > 300, section
    for figure in FIGURES:
        box = page.locator(f'[data-figure="{figure}"] svg').bounding_box()
        assert box and box["height"] > 100 and box["width"] > 200, figure
    decisions = _audit(audit)
    assert int(_count(page, "records")) == sum(decisions.values())
    assert int(_count(page, "dropped")) == sum(n for d, n in decisions.items() if d in
                                               ("not-in-panel", "allele-mismatch", "duplicate", "palindromic-ambiguous"))
    written, imputed = summary.split("records")[0].split()[-1], summary.split(" imputed")[0].split()[-1]
    assert _count(page, "records_written") == written and _count(page, "imputed_records") == imputed
    assert _count(page, "samples") == "10" and _count(page, "masked_sites") != ""
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_flipped_sites_and_another_build_show_in_the_inputs(browser, tmp_path):
    header, records = vcf_edit.read_lines()
    snps = [i for i, r in enumerate(records) if len(r[3]) == 1 and len(r[4]) == 1 and not vcf_edit.is_palindromic(r)]
    flipped = snps[::10]  # a tenth of the SNPs on the other strand
    shifted = snps[5:8]  # three at positions of another build
    for i in flipped:
        records[i] = vcf_edit.flip(records[i])
    for i in shifted:
        records[i][1] = str(int(records[i][1]) + 1)
    target = vcf_edit.write(tmp_path / "odd.vcf", header, records)
    audit = tmp_path / "audit.tsv"
    _impute(target, tmp_path / "odd.vcf.gz", "--audit", audit)
    page = _open(browser, tmp_path / "odd.html", tmp_path / "odd.png")
    decisions = _audit(audit)
    assert int(_count(page, "flip")) == decisions["flip"] + decisions["flip+swap"] >= len(set(flipped) - set(shifted))
    assert int(_count(page, "dropped")) >= len(shifted)
    listed = page.locator('[data-table="dropped"]').inner_text()
    assert all(str(int(records[i][1])) in listed for i in shifted)
    assert int(_count(page, "typed_sites")) == int(_count(page, "used"))


def test_no_html_and_an_existing_page(tmp_path):
    out = tmp_path / "x.vcf.gz"
    _impute(TARGET_PHASED, out, "--no-html")
    assert not (tmp_path / "x.html").exists()
    (tmp_path / "y.html").write_text("keep me")
    refused = subprocess.run([sys.executable, "-m", "genimpute", "-q", "impute", str(TARGET_PHASED), "--ref",
                              str(PANEL), "--out", str(tmp_path / "y.vcf.gz")], capture_output=True, text=True)
    assert refused.returncode == 1 and "y.html" in refused.stderr and "--no-html" in refused.stderr
    assert (tmp_path / "y.html").read_text() == "keep me" and not (tmp_path / "y.vcf.gz").exists()
    _impute(TARGET_PHASED, tmp_path / "y.vcf.gz", "--force")
    assert (tmp_path / "y.html").read_text().startswith("<!DOCTYPE html>")


def test_evaluate_writes_a_page_that_renders_its_tables_and_figures(browser, tmp_path):
    report = tmp_path / "report"
    result = subprocess.run([sys.executable, "-m", "genimpute", "evaluate", "--truth", str(TARGET_TRUTH),
                             "--labels", "beagle,minimac4", "--out", str(report), str(DATA / "beagle.imputed.vcf.gz"),
                             str(DATA / "minimac4.imputed.vcf.gz")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    page = _open(browser, report / "report.html", tmp_path / "evaluation.png")
    for section in ("inputs", "accuracy", "overall", "calibration", "quality"):
        box = page.locator(f"#{section}").bounding_box()
        assert box and box["height"] > 50, section
    for figure in ("r2_by_maf", "calibration"):
        image = page.locator(f'[data-figure="{figure}"] img')
        assert image.evaluate("img => img.complete && img.naturalWidth") > 0, figure
    overall = {row["tool"]: row for row in json.loads((report / "report.json").read_text())["accuracy"]
               if row["maf_bin"] == "all imputed" and row["population"] == "all"}
    shown = page.locator('[data-table="overall"]').inner_text()
    for tool, row in overall.items():
        assert tool in shown and f"{row['aggregate_r2']:.4f}" in shown


def test_a_genome_wide_run_has_one_page_counting_every_contig_once(browser, tmp_path):
    require("bcftools")
    genome = make_genome_example(tmp_path)
    result = subprocess.run([sys.executable, "-m", "genimpute", "-q", "impute", "target.vcf.gz", "--ref",
                             "panel.chr*.vcf.gz", "--out", "imp.chr{chrom}.vcf.gz"],
                            capture_output=True, text=True, cwd=genome)
    assert result.returncode == 0, result.stderr
    assert not list(genome.glob("imp.chr*.html"))  # one page for the run, not one per contig
    page = _open(browser, genome / "imp.html", tmp_path / "genome.png")
    for section in SECTIONS:
        box = page.locator(f"#{section}").bounding_box()
        assert box and box["height"] > 50, section
    for figure in FIGURES:
        box = page.locator(f'[data-figure="{figure}"] svg').bounding_box()
        assert box and box["height"] > 100, figure
    written = {c: _records(genome / f"imp.chr{c}.vcf.gz") for c in ("20", "21", "Y")}
    assert int(_count(page, "records_written")) == sum(written.values())
    assert int(_count(page, "records")) == _records(genome / "target.vcf.gz")  # each target record once
    assert _count(page, "samples") == "10"
    pieces = page.locator('[data-table="pieces"]').inner_text()
    assert all(contig in pieces for contig in ("20", "21", "Y"))
    single = tmp_path / "single20.vcf.gz"
    _impute(genome / "target20.vcf.gz", single)
    alone = _open(browser, tmp_path / "single20.html", tmp_path / "single20.png")
    assert _count(alone, "used") == _decisions_row(page, "20")["used"]


def _records(path) -> int:
    return int(subprocess.run(["bcftools", "index", "-n", str(path)], capture_output=True, text=True,
                              check=True).stdout)


def _decisions_row(page, contig: str) -> dict:
    """The decisions table's row of a contig, by column name."""
    table = page.locator('[data-table="decisions"]')
    header = table.locator("tr").first.inner_text().split("\t")
    for row in table.locator("tr").all()[1:]:
        cells = row.inner_text().split("\t")
        if cells[0].strip() == contig:
            return dict(zip((h.strip() for h in header), (c.strip() for c in cells)))
    raise AssertionError(f"no row for contig {contig}")


def test_a_dense_array_s_frequencies_render_as_shaded_cells(browser, tmp_path):
    """A genome-wide array's sites (more than run_plots.POINTS_DRAWN) drawn
    as the grid of cells: Chromium lays every cell out inside the figure,
    the fullest darkest, and paints the cloud along the diagonal."""
    rng = np.random.default_rng(3)
    panel_af = rng.uniform(0, 1, 50_000)
    frequencies = pd.DataFrame({"target_af": np.clip(panel_af + rng.normal(0, 0.02, len(panel_af)), 0, 1),
                                "panel_af": panel_af, "chi2": 1.0})
    path = tmp_path / "dense.html"
    path.write_text(f'<!DOCTYPE html><html><body><figure data-figure="af_scatter">'
                    f'{run_plots.frequency_scatter(frequencies)}</figure></body></html>')
    page = _open(browser, path, tmp_path / "dense.png")
    figure = page.locator('[data-figure="af_scatter"] svg').bounding_box()
    cells = page.locator('[data-points="sites"] rect')
    assert 0 < cells.count() <= run_plots.GRID_CELLS ** 2
    boxes = cells.evaluate_all("cells => cells.map(c => { const b = c.getBoundingClientRect(); "
                               "return [b.x, b.y, b.width, b.height, Number(c.getAttribute('fill-opacity'))]; })")
    inside = [figure["x"] <= x and x + w <= figure["x"] + figure["width"] + 1 and figure["y"] <= y
              and y + h <= figure["y"] + figure["height"] + 1 and w > 0 and h > 0 for x, y, w, h, _ in boxes]
    assert all(inside) and max(opacity for *_, opacity in boxes) == 1.0
    image = np.asarray(Image.open(tmp_path / "dense.png").convert("RGB"), dtype=np.int32)
    blue = (image[:, :, 2] - image[:, :, 0] > 60)  # the cells' colour, not the page's white or the axes' grey
    assert blue.sum() > 2_000
    rows, columns = np.nonzero(blue)
    assert np.corrcoef(rows, columns)[0, 1] < -0.9  # low panel frequency bottom left, high top right
