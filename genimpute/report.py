"""Report directory of an Evaluation: report.md (tables + figures),
report.html (the same as one self-contained page), report.json, and the
PNG figures, optionally with a wall-time/peak-memory table."""

from __future__ import annotations

import base64
import html
import json
import math
import os
from pathlib import Path

import pandas as pd

from genimpute import plots
from genimpute.evaluation import EVERYONE, Evaluation, by_population, side_by_side
from genimpute.io.scratch import naming, scratch_directory
from genimpute.qc_report import STYLE

R2_PNG = "r2_by_maf.png"
CALIBRATION_PNG = "calibration.png"


def to_json(document) -> str:
    """JSON text of `document`, with NaN (undefined r2, empty bins) and
    infinities as null, which strict JSON readers accept."""
    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(document), indent=2, default=str)


def _cell(value) -> str:
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.4f}"  # nan: empty bin or r2 undefined
    return str(value)


def markdown_table(frame: pd.DataFrame, index_name: str | None = None) -> str:
    """A GitHub-flavoured markdown table of `frame` with its index as the first column."""
    header = [index_name or frame.index.name or "", *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.itertuples(name=None):  # keeps each column's type, unlike iterrows
        lines.append("| " + " | ".join([str(row[0]), *(_cell(v) for v in row[1:])]) + " |")
    return "\n".join(lines)


def _tools_side_by_side(table: pd.DataFrame, index: str, columns: dict) -> pd.DataFrame:
    """Per value of `index` (rows): each tool's `columns` ({name: column},
    `{field}` in a name spelled as the tool's quality field), as '<tool> <name>'."""
    wide = {}
    for tool, rows in table.groupby("tool", sort=False):
        rows = rows.set_index(index)
        field = rows["field"].iloc[0]
        for name, column in columns.items():
            wide[f"{tool} {name.format(field=field)}"] = rows[column]
    return pd.DataFrame(wide)


def calibration_side_by_side(table: pd.DataFrame) -> pd.DataFrame:
    """Per estimate bin (rows): variants and mean true r2 of each tool."""
    return _tools_side_by_side(table, "estimated_bin", {"{field} variants": "variants", "true r2": "mean_true_r2"})


def quality_side_by_side(table: pd.DataFrame) -> pd.DataFrame:
    """Per MAF bin (rows): each tool's quality estimate less the true r2
    (mean, mean absolute) and its correlation with the true r2."""
    return _tools_side_by_side(table, "maf_bin", {"{field} - r2": "mean_error",
                                                  "abs({field} - r2)": "mean_absolute_error",
                                                  "correlation": "correlation"})


def _sections(evaluation: Evaluation, timings: pd.DataFrame | None) -> list[str]:
    a = evaluation.accuracy
    out = [
        f"## Aggregate r² by MAF bin\n\nMAF from the {evaluation.maf_source}; every sample.\n\n"
        + markdown_table(side_by_side(a), "MAF bin") + f"\n\n![r² by MAF bin]({R2_PNG})",
        "## All imputed variants\n\n" + markdown_table(evaluation.overall()),
    ]
    if set(a["population"]) != {EVERYONE}:
        out.append("## Aggregate r² by population (all imputed variants)\n\n"
                   + markdown_table(by_population(a), "population"))
    if len(evaluation.calibration):
        out.append("## Calibration of the per-variant quality score\n\n"
                   "Variants binned by the tool's own estimate (DR2 or R2); mean true per-variant r² in each bin.\n\n"
                   + markdown_table(calibration_side_by_side(evaluation.calibration), "estimated r²")
                   + f"\n\n![calibration]({CALIBRATION_PNG})")
    if len(evaluation.quality):
        out.append("## The quality score's error by MAF bin\n\n"
                   "Each tool's estimate less the true per-variant r² (mean: below 0, a conservative score; and "
                   "mean absolute), and their correlation, over the variants whose truth varies.\n\n"
                   + markdown_table(quality_side_by_side(evaluation.quality), "MAF bin"))
    if timings is not None:
        out.append("## Wall time and peak memory\n\n" + markdown_table(timings.set_index("step"), "step"))
    return out


def write_report(
    evaluation: Evaluation,
    out_dir: str | Path,
    inputs: dict,
    timings: pd.DataFrame | None = None,
) -> Path:
    """Write report.md, report.json and the figures into `out_dir`; return report.md's path.
    Each file is written whole or not at all: they are made in a scratch
    directory inside `out_dir` and moved into it once all are written.

    inputs: what was compared ({"truth": path, ...}), listed at the top."""
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with naming(out_dir), scratch_directory(out_dir, ".genimpute-report") as scratch:
            _write_files(evaluation, scratch, inputs, timings)
            for written in scratch.iterdir():
                os.replace(written, out_dir / written.name)
    except BaseException:
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    return out_dir / "report.md"


def _write_files(evaluation: Evaluation, out_dir: Path, inputs: dict, timings: pd.DataFrame | None) -> None:
    plots.r2_by_maf(evaluation.accuracy, out_dir / R2_PNG)
    if len(evaluation.calibration):
        plots.calibration(evaluation.calibration, out_dir / CALIBRATION_PNG)
    title = "genimpute benchmark" if timings is not None else "genimpute evaluation"
    header = f"# {title}\n\n" + "\n".join(f"- {key}: `{value}`" for key, value in inputs.items())
    (out_dir / "report.md").write_text("\n\n".join([header, *_sections(evaluation, timings)]) + "\n")
    document = {
        "inputs": inputs,
        "maf_source": evaluation.maf_source,
        "accuracy": evaluation.accuracy.to_dict(orient="records"),
        "calibration": evaluation.calibration.to_dict(orient="records"),
        "quality": evaluation.quality.to_dict(orient="records"),
        "timings": timings.to_dict(orient="records") if timings is not None else None,
    }
    (out_dir / "report.json").write_text(to_json(document) + "\n")
    (out_dir / "report.html").write_text(html_page(evaluation, out_dir, inputs, timings))


def html_page(evaluation: Evaluation, figures: Path, inputs: dict, timings: pd.DataFrame | None) -> str:
    """report.md's content as one self-contained HTML page: the tables, and
    the figures in `figures` embedded as base64 PNG."""
    a = evaluation.accuracy
    listed = "".join(f"<li>{html.escape(str(k))}: <code>{html.escape(str(v))}</code></li>" for k, v in inputs.items())
    parts = [("inputs", "Inputs", f"<ul>{listed}</ul>"),
             ("accuracy", "Aggregate r² by MAF bin", _html_table(side_by_side(a), "accuracy")
              + _embedded(figures / R2_PNG, "r2_by_maf")),
             ("overall", "All imputed variants", _html_table(evaluation.overall(), "overall"))]
    if set(a["population"]) != {EVERYONE}:
        parts.append(("populations", "Aggregate r² by population", _html_table(by_population(a), "populations")))
    if len(evaluation.calibration):
        parts.append(("calibration", "Calibration of the quality score",
                      _html_table(calibration_side_by_side(evaluation.calibration), "calibration")
                      + _embedded(figures / CALIBRATION_PNG, "calibration")))
    if len(evaluation.quality):
        parts.append(("quality", "The quality score's error by MAF bin",
                      _html_table(quality_side_by_side(evaluation.quality), "quality")))
    if timings is not None:
        parts.append(("timings", "Wall time and peak memory", _html_table(timings.set_index("step"), "timings")))
    body = "".join(f'<section id="{key}"><h2>{title}</h2>{content}</section>' for key, title, content in parts)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>genimpute evaluation</title>"
            f"<style>{STYLE}</style></head><body><h1>genimpute evaluation</h1>{body}</body></html>\n")


def _html_table(frame: pd.DataFrame, key: str) -> str:
    text = frame.to_html(na_rep="–", float_format="{:.4f}".format, border=0)
    return text.replace("<table", f'<table data-table="{key}"', 1)


def _embedded(png: Path, key: str) -> str:
    data = base64.b64encode(png.read_bytes()).decode()
    return f'<figure data-figure="{key}"><img alt="{key}" src="data:image/png;base64,{data}"></figure>'
