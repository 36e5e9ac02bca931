"""The report directory (genimpute.report, genimpute.plots) and `genimpute evaluate --out`."""

from __future__ import annotations

import json
import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import run
from test_evaluate import (
    GT_OF_COUNT,
    SAMPLES,
    TRUTH_ROWS,
    hand_imputed,
    truth_file,
    write_vcf,
)

from genimpute.evaluation import ALL, BIN_LABELS, EVERYONE, evaluate
from genimpute.report import (
    CALIBRATION_PNG,
    R2_PNG,
    markdown_table,
    to_json,
    write_report,
)

# The hand example of test_evaluate: tool "alpha" (hand_imputed) scores
# aggregate r2 25/33 in [0.1, 0.2), 75/91 in [0.2, 0.5] and 60/73 over all
# three imputed variants; tool "beta" has perfect dosages (r2 1 everywhere).
# By population (P1 = S1 S2, P2 = S3 S4): alpha P1 1, P2 75/106.
ALPHA_R2 = {"[0.1, 0.2)": 25 / 33, "[0.2, 0.5]": 75 / 91, ALL: 60 / 73}
ALPHA_P2_R2 = 75 / 106

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def inputs(tmp_path) -> dict:
    """Truth and two imputed files: alpha with INFO/DR2, beta with INFO/R2."""
    truth = truth_file(tmp_path / "truth.vcf", SAMPLES, TRUTH_ROWS)
    alpha = hand_imputed(tmp_path / "alpha.vcf", info={100: "DR2=0.05", 200: "DR2=0.95", 300: "DR2=0.85"})
    estimates = {100: 0.35, 200: 0.95, 300: 0.75}
    beta = write_vcf(tmp_path / "beta.vcf", SAMPLES, [
        (pos, ref, alt, f"IMP;R2={estimates[pos]}", "GT:DS", [f"{GT_OF_COUNT[c]}:{c}" for c in counts])
        for pos, ref, alt, counts in TRUTH_ROWS
    ])
    return {"truth": truth, "alpha": alpha, "beta": beta}


@pytest.fixture
def evaluation(inputs):
    return evaluate(inputs["truth"], [inputs["alpha"], inputs["beta"]], labels=["alpha", "beta"])


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def _png_distinct_bytes(path: Path) -> int:
    """Distinct byte values in the decompressed image data: a blank
    (single-colour) image has only a handful whatever the row filters."""
    data = path.read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    bit_depth, colour_type = data[24], data[25]
    assert bit_depth == 8
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour_type]
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * channels)
    return len(set(raw))


def _section(markdown: str, title: str) -> str:
    """Text of the `## title...` section, up to the next section."""
    start = markdown.index("## " + title)
    end = markdown.find("\n## ", start + 1)
    return markdown[start:] if end < 0 else markdown[start:end]


def _table_rows(section: str) -> dict:
    """{first cell: [other cells]} of the markdown table in `section`, header included."""
    rows = {}
    for line in section.splitlines():
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def _overall_r2(evaluation, tool: str, bin_label: str = ALL, population: str = EVERYONE) -> float:
    a = evaluation.accuracy
    sel = a[(a["tool"] == tool) & (a["maf_bin"] == bin_label) & (a["population"] == population)]
    assert len(sel) == 1
    return float(sel["aggregate_r2"].iloc[0])


# --- write_report ------------------------------------------------------------

def test_write_report_files(tmp_path, evaluation, inputs):
    out = tmp_path / "report"
    path = write_report(evaluation, out, {"truth": str(inputs["truth"])})
    assert path == out / "report.md"
    for name in ("report.md", "report.json", R2_PNG, CALIBRATION_PNG):
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0, name


@pytest.mark.parametrize("name", [R2_PNG, CALIBRATION_PNG])
def test_figures_are_700_by_450_png_with_content(tmp_path, evaluation, name):
    write_report(evaluation, tmp_path, {})
    assert _png_size(tmp_path / name) == (700, 450)
    assert _png_distinct_bytes(tmp_path / name) > 20  # axes, text and lines, not a blank canvas


def test_report_json_is_strict_json_with_the_accuracy_rows(tmp_path, evaluation, inputs):
    write_report(evaluation, tmp_path, {"truth": str(inputs["truth"])})
    text = (tmp_path / "report.json").read_text()
    assert "NaN" not in text
    document = _strict_json(text)
    assert document["inputs"] == {"truth": str(inputs["truth"])}
    assert document["maf_source"] == evaluation.maf_source == "truth genotypes"
    assert document["timings"] is None
    rows = document["accuracy"]
    # one row per tool and (MAF bin, all imputed), every sample
    assert len(rows) == 2 * (len(BIN_LABELS) + 1)
    by_key = {(r["tool"], r["maf_bin"]): r for r in rows}
    for bin_label, r2 in ALPHA_R2.items():
        assert by_key["alpha", bin_label]["aggregate_r2"] == pytest.approx(r2)
        assert by_key["beta", bin_label]["aggregate_r2"] == pytest.approx(1.0)
    assert by_key["alpha", ALL]["variants"] == 3
    # empty bins: r2 undefined, written as null
    assert by_key["alpha", BIN_LABELS[0]]["variants"] == 0
    assert by_key["alpha", BIN_LABELS[0]]["aggregate_r2"] is None
    assert by_key["beta", BIN_LABELS[0]]["concordance"] is None
    # calibration: 10 estimate bins per tool, empty bins null
    calibration = document["calibration"]
    assert {(r["tool"], r["field"]) for r in calibration} == {("alpha", "DR2"), ("beta", "R2")}
    assert sum(r["variants"] for r in calibration) == 6
    assert any(r["mean_true_r2"] is None for r in calibration)
    # the estimate's error: a row per tool and (MAF bin, all imputed); one variant's correlation null
    quality = {(r["tool"], r["maf_bin"]): r for r in document["quality"]}
    assert len(quality) == 2 * (len(BIN_LABELS) + 1)
    assert quality["alpha", ALL]["variants"] == quality["beta", ALL]["variants"] == 3
    assert quality["beta", ALL]["mean_error"] == pytest.approx((0.35 + 0.95 + 0.75) / 3 - 1)
    assert quality["alpha", "[0.1, 0.2)"]["correlation"] is None


def test_report_md_side_by_side_table(tmp_path, evaluation):
    md = write_report(evaluation, tmp_path, {"truth": "t.vcf"}).read_text()
    assert md.startswith("# genimpute evaluation\n")
    assert "- truth: `t.vcf`" in md
    assert "Wall time" not in md
    section = _section(md, "Aggregate r² by MAF bin")
    assert f"![r² by MAF bin]({R2_PNG})" in section
    rows = _table_rows(section)
    assert rows["MAF bin"] == ["variants", "alpha", "beta"]
    for bin_label, r2 in ALPHA_R2.items():
        assert f"{r2:.4f}" == f"{_overall_r2(evaluation, 'alpha', bin_label):.4f}"
        assert rows[bin_label][1:] == [f"{r2:.4f}", "1.0000"]
    # variant counts are integers, not floats
    assert rows["[0.1, 0.2)"][0] == "1"
    assert rows["[0.2, 0.5]"][0] == "2"
    assert rows[ALL][0] == "3"
    # empty bins: no variants, r2 undefined
    for bin_label in BIN_LABELS[:5]:
        assert rows[bin_label] == ["0", "–", "–"]


def test_report_md_overall_table(tmp_path, evaluation):
    md = write_report(evaluation, tmp_path, {}).read_text()
    rows = _table_rows(_section(md, "All imputed variants"))
    header = rows.pop("tool")
    assert header == ["variants", "aggregate_r2", "mean_variant_r2", "concordance", "nonref_discordance"]
    assert list(rows) == ["alpha", "beta"]
    overall = evaluation.overall()
    for tool, cells in rows.items():
        assert cells[0] == str(int(overall.loc[tool, "variants"])) == "3"
        for column, cell in zip(header[1:], cells[1:]):
            assert cell == f"{overall.loc[tool, column]:.4f}", (tool, column)
    assert rows["alpha"][1] == f"{60 / 73:.4f}"
    assert rows["alpha"][3] == f"{5 / 6:.4f}"  # concordance of the hand example
    assert rows["beta"][1:] == ["1.0000", "1.0000", "1.0000", "0.0000"]


def test_report_md_calibration_section(tmp_path, evaluation):
    md = write_report(evaluation, tmp_path, {}).read_text()
    section = _section(md, "Calibration")
    assert f"![calibration]({CALIBRATION_PNG})" in section
    rows = _table_rows(section)
    assert rows["estimated r²"] == ["alpha DR2 variants", "alpha true r2", "beta R2 variants", "beta true r2"]
    # alpha: DR2 0.05 -> V1 (true r2 25/33), 0.95 -> V2 (1), 0.85 -> V3 (9/11)
    assert rows["[0.0, 0.1)"][:2] == ["1", f"{25 / 33:.4f}"]
    assert rows["[0.9, 1.0]"][:2] == ["1", f"{1:.4f}"]
    assert rows["[0.8, 0.9)"][:2] == ["1", f"{9 / 11:.4f}"]
    assert rows["[0.5, 0.6)"] == ["0", "–", "0", "–"]
    # beta: R2 0.35, 0.95, 0.75 -> one variant each in [0.3, 0.4), [0.9, 1.0], [0.7, 0.8), true r2 1
    assert rows["[0.3, 0.4)"][2:] == ["1", "1.0000"]
    assert rows["[0.7, 0.8)"][2:] == ["1", "1.0000"]
    assert rows["[0.9, 1.0]"][2:] == ["1", "1.0000"]
    for label, cells in rows.items():
        if label != "estimated r²":
            assert "." not in cells[0] and "." not in cells[2], (label, cells)  # counts print as integers


def test_report_md_quality_section(tmp_path, evaluation):
    md = write_report(evaluation, tmp_path, {}).read_text()
    rows = _table_rows(_section(md, "The quality score's error by MAF bin"))
    assert rows["MAF bin"] == ["alpha DR2 - r2", "alpha abs(DR2 - r2)", "alpha correlation",
                               "beta R2 - r2", "beta abs(R2 - r2)", "beta correlation"]
    # beta: R2 0.35, 0.95, 0.75 where every true r2 is 1 (V1 in [0.1, 0.2), V2 and V3 in [0.2, 0.5])
    assert rows["[0.1, 0.2)"][3:5] == [f"{-0.65:.4f}", f"{0.65:.4f}"]
    assert rows["[0.2, 0.5]"][3:5] == [f"{-0.15:.4f}", f"{0.15:.4f}"]
    assert rows["[0.2, 0.5]"][5] == "–"  # the true r2 do not vary: no correlation
    assert rows[BIN_LABELS[0]] == ["–"] * 6


def test_calibration_estimates_on_bin_edges(tmp_path, inputs):
    # Beagle writes DR2 with two decimals, so estimates of exactly 0.30, 0.70,
    # 0.90 are common; each belongs to the bin that starts there.
    edges = {100: 0.3, 200: 0.9, 300: 0.7}
    tool = write_vcf(tmp_path / "edges.vcf", SAMPLES, [
        (pos, ref, alt, f"IMP;R2={edges[pos]}", "GT:DS", [f"{GT_OF_COUNT[c]}:{c}" for c in counts])
        for pos, ref, alt, counts in TRUTH_ROWS
    ])
    cal = evaluate(inputs["truth"], [tool], labels=["edges"]).calibration.set_index("estimated_bin")["variants"]
    assert cal[["[0.3, 0.4)", "[0.7, 0.8)", "[0.9, 1.0]"]].tolist() == [1, 1, 1]


def test_no_calibration_without_quality_fields(tmp_path, inputs):
    plain = hand_imputed(tmp_path / "plain.vcf")
    result = evaluate(inputs["truth"], [plain], labels=["plain"])
    assert result.calibration.empty and result.quality.empty
    md = write_report(result, tmp_path / "out", {}).read_text()
    assert "Calibration" not in md and "quality score's error" not in md
    assert CALIBRATION_PNG not in md
    assert not (tmp_path / "out" / CALIBRATION_PNG).exists()
    assert _png_size(tmp_path / "out" / R2_PNG) == (700, 450)
    document = _strict_json((tmp_path / "out" / "report.json").read_text())
    assert document["calibration"] == document["quality"] == []


def test_timings_table(tmp_path, evaluation):
    timings = pd.DataFrame([
        {"tool": "genimpute", "step": "train", "wall_s": 12.5, "peak_rss_gb": 0.75},
        {"tool": "beagle", "step": "impute", "wall_s": 3.25, "peak_rss_gb": float("nan")},
    ])
    md = write_report(evaluation, tmp_path, {"threads": "2"}, timings).read_text()
    assert md.startswith("# genimpute benchmark\n")
    rows = _table_rows(_section(md, "Wall time and peak memory"))
    assert rows["step"] == ["tool", "wall_s", "peak_rss_gb"]
    assert rows["train"] == ["genimpute", "12.5000", "0.7500"]
    assert rows["impute"] == ["beagle", "3.2500", "–"]
    document = _strict_json((tmp_path / "report.json").read_text())
    assert document["timings"][0] == {"tool": "genimpute", "step": "train", "wall_s": 12.5, "peak_rss_gb": 0.75}
    assert document["timings"][1]["peak_rss_gb"] is None


def test_population_section_only_with_populations(tmp_path, evaluation):
    md = write_report(evaluation, tmp_path, {}).read_text()
    assert "by population" not in md


# --- markdown_table and to_json ----------------------------------------------

def test_markdown_table_renders_nan_as_dash():
    frame = pd.DataFrame({"n": [3, 0], "r2": [0.123456, float("nan")], "name": ["x", "y"]},
                         index=pd.Index(["a", "b"], name="row"))
    lines = markdown_table(frame).splitlines()
    assert lines == [
        "| row | n | r2 | name |",
        "|---|---|---|---|",
        "| a | 3 | 0.1235 | x |",
        "| b | 0 | – | y |",
    ]
    assert markdown_table(frame, "label").splitlines()[0] == "| label | n | r2 | name |"


def test_to_json_turns_nan_into_null_recursively():
    document = {
        "a": float("nan"),
        "b": [1.5, np.nan, {"c": np.float64("nan"), "d": [float("nan"), 2]}],
        "e": "text",
        "f": None,
        "g": 3,
    }
    text = to_json(document)
    assert "NaN" not in text
    assert _strict_json(text) == {"a": None, "b": [1.5, None, {"c": None, "d": [None, 2]}], "e": "text", "f": None, "g": 3}


def test_to_json_of_a_frame_with_nan():
    frame = pd.DataFrame({"r2": [0.5, float("nan")], "variants": [2, 0]})
    assert _strict_json(to_json(frame.to_dict(orient="records"))) == [
        {"r2": 0.5, "variants": 2}, {"r2": None, "variants": 0}]


# --- genimpute evaluate --out --populations --------------------------------------

def test_evaluate_cli_writes_report_with_populations(tmp_path, inputs):
    samples = tmp_path / "samples.tsv"
    samples.write_text("sample\tpopulation\nS1\tP1\nS2\tP1\nS3\tP2\nS4\tP2\n")
    out = tmp_path / "report"
    result = run(["evaluate", "--truth", str(inputs["truth"]), "--labels", "alpha,beta", "--populations", str(samples),
                  "--out", str(out), str(inputs["alpha"]), str(inputs["beta"])])
    assert f"report written to {out / 'report.md'}" in result.output
    for name in ("report.md", "report.json", R2_PNG, CALIBRATION_PNG):
        assert (out / name).is_file(), name
    md = (out / "report.md").read_text()
    assert f"- alpha: `{inputs['alpha']}`" in md and f"- beta: `{inputs['beta']}`" in md
    rows = _table_rows(_section(md, "Aggregate r² by population"))
    assert rows["population"] == ["alpha", "beta"]
    assert list(rows) == ["population", EVERYONE, "P1", "P2"]
    assert rows[EVERYONE] == [f"{60 / 73:.4f}", "1.0000"]
    assert rows["P1"] == ["1.0000", "1.0000"]
    assert rows["P2"] == [f"{ALPHA_P2_R2:.4f}", "1.0000"]
    document = _strict_json((out / "report.json").read_text())
    p2 = [r for r in document["accuracy"] if (r["tool"], r["population"], r["maf_bin"]) == ("alpha", "P2", ALL)]
    assert len(p2) == 1 and p2[0]["aggregate_r2"] == pytest.approx(ALPHA_P2_R2)


def test_evaluate_cli_bad_samples_table(tmp_path, inputs):
    samples = tmp_path / "samples.tsv"
    samples.write_text("sample\tpop\nS1\tP1\n")
    out = tmp_path / "report"
    result = run(["evaluate", "--truth", str(inputs["truth"]), "--populations", str(samples), "--out", str(out),
                  str(inputs["alpha"])], ok=False)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("genimpute: error:")]
    assert len(errors) == 1, result.output
    assert "population" in errors[0] and str(samples) in errors[0]
    assert "Traceback" not in result.output
    assert not (out / "report.md").exists()


def test_nan_cells_in_the_report_are_dashes_not_nan(tmp_path, evaluation):
    md = write_report(evaluation, tmp_path, {}).read_text()
    assert "nan" not in md.lower()
    assert math.isnan(_overall_r2(evaluation, "alpha", BIN_LABELS[0]))  # so the report does have empty cells
    assert "–" in md
