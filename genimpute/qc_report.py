"""The QC report of an imputation run: one self-contained HTML page beside
the output (no scripts, fonts or images fetched from anywhere; figures as
inline SVG), for deciding whether to trust the run: how it was run, what
became of the target's records, whether its allele frequencies agree with
the panel's, which samples look wrong, and how well the records were
imputed by MAF bin. Long lists are cut to their first rows, so a cohort of
any size gives a page of bounded size; --audit has every record."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from genimpute import run_plots
from genimpute.harmonise import FLIP, FLIP_SWAP, SWAP
from genimpute.io.output_names import output_stem
from genimpute.io.scratch import write_whole
from genimpute.run_facts import CHI2_OUTLIER

LISTED_ROWS = 50  # rows of a list shown on the page; the count says how many there are

STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.counts dt { font-weight: bold; float: left; clear: left; width: 22em; } .counts dd { margin-left: 23em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #666; font-size: .9em; }
table[data-table="provenance"] td { text-align: left; font-family: monospace; }
"""


@dataclass
class RunReport:
    """Everything the page shows (see genimpute.run_facts for the tables)."""

    provenance: dict
    decisions: pd.DataFrame
    dropped: pd.DataFrame
    frequencies: pd.DataFrame
    samples: pd.DataFrame
    flagged: pd.DataFrame
    samples_in_panel: int
    possible_duplicates: int
    quality: pd.DataFrame
    counts: dict = field(default_factory=dict)
    validation: dict | None = None
    pieces: pd.DataFrame | None = None  # a genome-wide run's single-panel runs, one row each


def page_path(out: str | Path) -> Path:
    """The page beside an output: x.vcf.gz, x.bgen or x.pgen -> x.html."""
    stem = output_stem(out)
    return stem.with_name(f"{stem.name}.html")


def write_page(path: str | Path, report: RunReport) -> None:
    html_text = render(report)
    write_whole(path, lambda tmp: tmp.write_text(html_text))


def render(report: RunReport) -> str:
    sections = [_run_section(report), _inputs_section(report), _frequencies_section(report),
                _samples_section(report), _imputation_section(report)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>genimpute QC report</title><style>{STYLE}</style></head><body>"
            "<h1>genimpute QC report</h1>" + "".join(sections) + "</body></html>\n")


def _section(key: str, title: str, *parts: str) -> str:
    return f'<section id="{key}"><h2>{html.escape(title)}</h2>{"".join(parts)}</section>'


def _counts(items: list) -> str:
    """A list of (key, label, value), each value findable by its data-count key."""
    rows = "".join(f'<dt>{html.escape(label)}</dt><dd data-count="{key}">{value}</dd>' for key, label, value in items)
    return f'<dl class="counts">{rows}</dl>'


def _table(frame: pd.DataFrame, key: str, floats: str = "{:.4f}") -> str:
    if frame.empty:
        return f'<p class="note" data-table="{key}">None.</p>'
    shown = frame.head(LISTED_ROWS)
    more = f'<p class="note">First {LISTED_ROWS} of {len(frame)}.</p>' if len(frame) > LISTED_ROWS else ""
    text = shown.to_html(index=False, na_rep="", float_format=floats.format, border=0)
    return text.replace("<table", f'<table data-table="{key}"', 1) + more


def _figure(key: str, svg: str, caption: str) -> str:
    return f'<figure data-figure="{key}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def _run_section(report: RunReport) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in report.provenance.items())
    pieces = "" if report.pieces is None else "<h3>Contigs, one run each</h3>" + _table(report.pieces, "pieces", "{:.2f}")
    return _section("run", "The run", f'<table data-table="provenance">{rows}</table>', pieces)


def _inputs_section(report: RunReport) -> str:
    d = report.decisions
    total = lambda column: int(d[column].sum()) if column in d else 0  # noqa: E731
    items = [("records", "target records", total("records")), ("used", "used as evidence", total("used")),
             ("swap", "alleles swapped", total(SWAP) + total(FLIP_SWAP)),
             ("flip", "strand flipped", total(FLIP) + total(FLIP_SWAP)),
             ("dropped", "not used (listed below)", len(report.dropped))]
    return _section("inputs", "Inputs: the target's records against the panel", _counts(items),
                    _table(d, "decisions"), "<h3>Records not used</h3>", _table(report.dropped, "dropped"))


def _frequencies_section(report: RunReport) -> str:
    f = report.frequencies
    outliers = f[f["chi2"] > CHI2_OUTLIER].sort_values("chi2", ascending=False)
    items = [("typed_sites", "typed sites compared", len(f)),
             ("af_outliers", f"chi-square above {CHI2_OUTLIER:g}", len(outliers))]
    return _section("frequencies", "Allele frequencies: target against panel", _counts(items),
                    _figure("af_scatter", run_plots.frequency_scatter(f), "ALT frequency at each typed site"),
                    "<h3>Outliers</h3>", _table(outliers, "af_outliers"))


def _samples_section(report: RunReport) -> str:
    s = report.samples
    items = [("samples", "samples", len(s)), ("in_panel", "found in the panel", report.samples_in_panel),
             ("possible_duplicates", "possibly in the panel (too short to tell)", report.possible_duplicates),
             ("haploid_samples", "samples with haploid calls (chrX males)", int((s["haploid_share"] > 0).sum())),
             ("flagged", "flagged (listed below)", len(report.flagged))]
    return _section("samples", "Samples", _counts(items),
                    _figure("sample_histograms", run_plots.sample_histograms(s), "call rate and heterozygosity"),
                    "<h3>Flagged samples</h3>", _table(report.flagged, "flagged"))


def _imputation_section(report: RunReport) -> str:
    items = [(key, label, report.counts.get(key, "")) for key, label in
             (("records_written", "records written"), ("imputed_records", "records imputed"))]
    if report.validation:
        v = report.validation
        items += [("masked_sites", "typed sites hidden (--validate)", v["masked_sites"]),
                  ("empirical_r2", "their empirical r2", f"{v['empirical_r2']:.4f}")]
    return _section("imputation", "Imputation quality: DR2 by MAF bin", _counts(items),
                    _table(report.quality, "quality", "{:.3f}"),
                    _figure("dr2_kept", run_plots.dr2_kept(report.quality), "imputed records a DR2 filter keeps"))
