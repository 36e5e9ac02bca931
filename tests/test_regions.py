"""Regions, chunk lists, and chunked imputation equal to a single run."""

from __future__ import annotations


import pytest
import vcf_edit
from cli_helpers import run
from hypothesis import given
from hypothesis import strategies as st
from paths import PANEL, TARGET_PHASED, TARGET_TRUTH
from tools import run_tool

from genimpute.errors import InputError
from genimpute.regions import Region, parse_region, parse_size, plan_chunks


@pytest.mark.parametrize(("text", "expected"), [
    ("20", Region("20")),
    ("chr20:1,000-2,000", Region("chr20", 1000, 2000)),
    ("20:5-5", Region("20", 5, 5)),
    ("20:9000001-", Region("20", 9000001, None)),
])
def test_parse_region(text, expected):
    assert parse_region(text) == expected


@pytest.mark.parametrize("text", ["", "20:", "20:0-10", "20:10-5", "20:a-b", "20:1-2-3", "20 :1-2"])
def test_parse_region_rejects(text):
    with pytest.raises(InputError, match="region"):
        parse_region(text)


def test_region_membership_reconciles_contig_names():
    r = parse_region("chr20:100-200")
    assert r.contains("20", 100) and r.contains("20", 200)
    assert not r.contains("20", 99) and not r.contains("20", 201) and not r.contains("21", 150)
    assert parse_region("20:100-").contains("20", 10**9)


@pytest.mark.parametrize(("text", "bp"), [("5Mb", 5_000_000), ("250kb", 250_000), ("1000", 1000), ("1.5mb", 1_500_000), ("7bp", 7)])
def test_parse_size(text, bp):
    assert parse_size(text, "--size") == bp


@pytest.mark.parametrize("text", ["", "0", "5 Gb", "-1kb", "kb"])
def test_parse_size_rejects(text):
    with pytest.raises(InputError, match="--size"):
        parse_size(text, "--size")


@given(st.dictionaries(st.sampled_from(["1", "20", "chrX"]),
                       st.tuples(st.integers(1, 10**6), st.integers(0, 10**6)), min_size=1),
       st.integers(1000, 300_000), st.integers(1, 2 * 10**6))
def test_chunks_put_every_position_in_exactly_one_chunk(spans, size, pos):
    spans = {c: (first, first + extra) for c, (first, extra) in spans.items()}
    chunks = plan_chunks(spans, size)
    for contig, (first, last) in spans.items():
        mine = [r for r in chunks if r.contig == contig]
        assert mine[0].start == 1 and mine[-1].end is None
        assert sum(r.contains(Region(contig).key, pos) for r in mine) == 1
        assert all(r.end - r.start + 1 == size for r in mine[1:-1])
        assert all(r.start <= last for r in mine)  # no chunk lies wholly past the last record


def _records(path) -> list[str]:
    return run_tool(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout.splitlines()


def _with_missing_calls(path):
    """The phased target with 5% of its calls set missing."""
    header, records = vcf_edit.read_lines()
    vcf_edit.hide_calls(records, 0.05, seed=5)
    return vcf_edit.write(path / "missing.vcf", header, records)


@pytest.mark.parametrize("missing_calls", [False, True])
def test_chunked_imputation_concatenates_to_the_single_run(missing_calls, tmp_path, trained):
    target = _with_missing_calls(tmp_path) if missing_calls else TARGET_PHASED
    whole = tmp_path / "whole.vcf.gz"
    run(["-q", "impute", str(target), "--model", str(trained), "--out", str(whole)])
    chunk_list = tmp_path / "chunks.txt"
    run(["chunks", "--ref", str(PANEL), "--size", "25kb", "--out", str(chunk_list)])
    regions = chunk_list.read_text().split()
    assert len(regions) == 4
    parts = []
    for i, region in enumerate(regions):
        parts.append(tmp_path / f"chunk{i}.vcf.gz")
        run(["-q", "impute", str(target), "--model", str(trained), "--out", str(parts[-1]), "--region", region])
    joined = tmp_path / "joined.vcf.gz"
    run_tool(["bcftools", "concat", "-Oz", "-o", str(joined), *map(str, parts)], check=True, capture_output=True)
    assert _records(joined) == _records(whole)  # same records, same values, seams included

    scores = [run(["evaluate", "--json", "--truth", str(TARGET_TRUTH), "--labels", "x", str(p)]).output for p in (whole, joined)]
    assert scores[0] == scores[1]


def test_chunks_of_a_compact_panel_are_those_of_its_vcf(tmp_path):
    vcf = vcf_edit.on_two_contigs(PANEL, tmp_path / "panel.vcf")
    compact = tmp_path / "panel.gpanel"
    run(["-q", "panel", str(vcf), "--out", str(compact)])
    lists = [run(["chunks", "--ref", str(ref), "--size", "25kb"]).output.split() for ref in (vcf, compact)]
    assert lists[0] == lists[1]
    assert {r.split(":")[0] for r in lists[0]} == {"20", "21"} and len(lists[0]) == 8


def test_region_on_a_contig_the_target_lacks(tmp_path, trained):
    result = run(["impute", str(TARGET_PHASED), "--model", str(trained), "--out", str(tmp_path / "x.vcf.gz"),
                  "--region", "21:1-1000"], ok=False)
    assert result.exit_code == 1 and "genimpute: error: --region 21:1-1000" in result.output
    assert not (tmp_path / "x.vcf.gz").exists()


def test_region_with_validate_hides_only_sites_inside_it(tmp_path, trained):
    result = run(["impute", str(TARGET_PHASED), "--model", str(trained), "--out", str(tmp_path / "x.vcf.gz"),
                  "--region", "20:9000001-9030000", "--validate", "--validate-fraction", "0.5"])
    typed_inside = [line for line in _records(TARGET_PHASED) if 9000001 <= int(line.split("\t")[1]) <= 9030000]
    assert f"validation: {round(0.5 * len(typed_inside))} typed sites hidden" in result.output
