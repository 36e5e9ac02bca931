"""train -> impute -> evaluate on a tiny real slice, through the CLI."""

import gzip

import cyvcf2
import numpy as np
import pytest
import torch
from cli_helpers import TINY, run
from paths import ARRAY, DATA, PANEL
from tools import require, run_tool

from genimpute.modeldir import load_model_dir
from genimpute.panel import ReferencePanel


@pytest.fixture(scope="module")
def imputed(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("imputed") / "imputed.vcf.gz"
    run(["-q", "impute", str(DATA / "targets.omni2.5.vcf.gz"), "--model", str(trained), "--out", str(out)])
    return out


def test_model_directory_reloads(trained):
    loaded = load_model_dir(trained)
    assert loaded.provenance["steps"] == 12
    assert loaded.config.window.untyped == 40
    assert loaded.panel.n_haplotypes == 2 * 199  # every 5th of 991 samples
    assert len(loaded.provenance["history"]) >= 2


def test_imputed_vcf_covers_every_panel_record(imputed, data):
    panel = [(v.POS, v.REF, v.ALT[0]) for v in cyvcf2.VCF(str(data / "panel.vcf.gz"))]
    typed = {(v.POS, v.REF, v.ALT[0]) for v in cyvcf2.VCF(str(data / "targets.omni2.5.vcf.gz"))}
    out = cyvcf2.VCF(str(imputed))
    assert out.samples == cyvcf2.VCF(str(data / "targets.omni2.5.vcf.gz")).samples
    seen = []
    for v in out:
        key = (v.POS, v.REF, v.ALT[0])
        seen.append(key)
        ds = v.format("DS")[:, 0]
        gp = v.format("GP")
        assert np.all((ds >= 0) & (ds <= 2))
        np.testing.assert_allclose(gp.sum(axis=1), 1.0, atol=0.003)
        np.testing.assert_allclose(gp[:, 1] + 2 * gp[:, 2], ds, atol=0.003)
        if key in typed:
            assert not v.INFO.get("IMP")
        else:
            assert v.INFO.get("IMP") and 0 <= v.INFO.get("DR2") <= 1
    assert seen == panel  # every panel record, once, in panel order


def test_typed_genotypes_pass_through_unchanged(imputed, data):
    target = {v.POS: v.genotype.array()[:, :2].tolist() for v in cyvcf2.VCF(str(data / "targets.omni2.5.vcf.gz"))}
    checked = 0
    for v in cyvcf2.VCF(str(imputed)):
        if v.POS in target and not v.INFO.get("IMP"):
            assert v.genotype.array()[:, :2].tolist() == target[v.POS]
            checked += 1
    assert checked == len(target)


def test_bcftools_reads_output_and_index(imputed):
    header = run_tool(["bcftools", "view", "-h", str(imputed)], check=True, capture_output=True, text=True).stdout
    assert "##source=genimpute" in header and "##genimputeCommand=" in header
    region = run_tool(["bcftools", "view", "-H", "-r", "20:9050000-9060000", str(imputed)],
                            check=True, capture_output=True, text=True).stdout
    assert region.count("\n") > 10


def test_evaluate_prints_r2_table(imputed, data):
    result = run(["evaluate", "--truth", str(data / "targets.truth.vcf.gz"), "--ref", str(data / "panel.vcf.gz"),
                  "--labels", "genimpute", str(imputed)])
    assert "all imputed" in result.output and "genimpute" in result.output
    assert "The quality score less the true r2 by MAF bin" in result.output
    as_json = run(["evaluate", "--json", "--truth", str(data / "targets.truth.vcf.gz"), str(imputed)]).output
    import json

    document = json.loads(as_json)
    overall = [r for r in document["accuracy"] if r["maf_bin"] == "all imputed"][0]
    assert overall["variants"] > 1000
    assert 0 < overall["aggregate_r2"] <= 1
    quality = [r for r in document["quality"] if r["maf_bin"] == "all imputed"][0]
    assert quality["field"] == "DR2" and 0 < quality["variants"] <= overall["variants"]
    assert quality["mean_absolute_error"] >= abs(quality["mean_error"])
    assert 0 < quality["correlation"] <= 1


@pytest.mark.slow
def test_resume_reaches_the_uninterrupted_state(tmp_path, data, trained):
    """Stop at step 8 (budget), resume to 12: same weights as the 12-step run."""
    args = ["-q", "train", "--ref", str(data / "panel.vcf.gz"), "--array", str(data / "omni2.5_chr20_9.0-9.1Mb.txt"),
            "--out", str(tmp_path / "m"), *TINY]
    run([*args[:-len(TINY)], *TINY[:1], "8", *TINY[2:]])
    assert load_model_dir(tmp_path / "m").provenance["steps"] == 8
    run([*args, "--resume"])
    resumed = load_model_dir(tmp_path / "m").model.state_dict()
    straight = load_model_dir(trained).model.state_dict()
    for name in straight:
        torch.testing.assert_close(resumed[name], straight[name], atol=1e-5, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("backbone,flags", [("msa", []), ("spin", []), ("npssm", []), ("spin", ["--neighbours", "4"])],
                         ids=["msa", "spin", "npssm", "spin-neighbours"])
def test_each_backbone_trains_resumes_imputes_and_evaluates(backbone, flags, tmp_path, data):
    """The other backbones go through the same commands as the default, match (the `trained` model)."""
    base = ["-q", "train", "--ref", str(data / "panel.vcf.gz"), "--array", str(data / "omni2.5_chr20_9.0-9.1Mb.txt"),
            "--backbone", backbone, *flags]
    heads = TINY.index("--heads")  # npssm's scans have heads of their own: it takes no --heads
    tiny = TINY if backbone != "npssm" else TINY[:heads] + TINY[heads + 2:]
    run([*base, *tiny, "--out", str(tmp_path / "straight")])
    run([*base, *tiny[:1], "8", *tiny[2:], "--out", str(tmp_path / "m")])
    run([*base, *tiny, "--out", str(tmp_path / "m"), "--resume"])
    resumed, straight = (load_model_dir(tmp_path / d) for d in ("m", "straight"))
    assert resumed.config.model.name == backbone and resumed.provenance["steps"] == 12
    for name, value in straight.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], value, atol=1e-5, rtol=1e-4)
    out = tmp_path / "imputed.vcf.gz"
    run(["-q", "impute", str(data / "targets.omni2.5.vcf.gz"), "--model", str(tmp_path / "m"), "--out", str(out)])
    header = run_tool(["bcftools", "view", "-h", str(out)], check=True, capture_output=True, text=True).stdout
    assert f"({backbone}, 12 steps)" in header
    n_imputed = int(run_tool(["bcftools", "view", "-H", "-i", "INFO/IMP=1", str(out)], check=True,
                                   capture_output=True, text=True).stdout.count("\n"))
    assert n_imputed > 1000
    result = run(["evaluate", "--truth", str(data / "targets.truth.vcf.gz"), "--labels", backbone, str(out)])
    assert "all imputed" in result.output and backbone in result.output


@pytest.mark.slow
def test_default_model_location(tmp_path, data, monkeypatch):
    monkeypatch.delenv("GENIMPUTE_MODEL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    run(["-q", "train", "--ref", str(data / "panel.vcf.gz"), "--array", str(data / "omni2.5_chr20_9.0-9.1Mb.txt"),
         *TINY[:1], "2", *TINY[2:]])
    assert (tmp_path / "xdg" / "genimpute" / "model" / "model.pt").is_file()
    run(["-q", "impute", str(data / "targets.omni2.5.vcf.gz")])
    assert (tmp_path / "targets.omni2.5.imputed.vcf.gz").is_file()
    assert (tmp_path / "targets.omni2.5.imputed.vcf.gz.tbi").is_file()
    # a second run refuses to overwrite, --force allows it
    assert run(["-q", "impute", str(data / "targets.omni2.5.vcf.gz")], ok=False).exit_code == 1
    run(["-q", "impute", str(data / "targets.omni2.5.vcf.gz"), "--force"])


# --- bad input: one clear line, non-zero exit --------------------------------

def _vcf(path, records, samples=("S1", "S2"), contig="20"):
    lines = ["##fileformat=VCFv4.2", f"##contig=<ID={contig}>", '##FORMAT=<ID=GT,Number=1,Type=String,Description="GT">',
             "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *samples])]
    lines += ["\t".join([contig, str(pos), ".", ref, alt, ".", "PASS", ".", "GT", *gts]) for pos, ref, alt, gts in records]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _error(args):
    result = run(args, ok=False)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("genimpute: error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_missing_panel_file(tmp_path, data):
    msg = _error(["train", "--ref", str(tmp_path / "nope.vcf.gz"), "--array", str(data / "omni2.5_chr20_9.0-9.1Mb.txt"),
                  "--out", str(tmp_path / "m")])
    assert "nope.vcf.gz" in msg and "no such file" in msg


def test_unphased_panel(tmp_path, data):
    panel = _vcf(tmp_path / "p.vcf.gz", [(100, "A", "G", ["0|1", "1|1"]), (200, "C", "T", ["0/1", "0|0"])])
    array = tmp_path / "a.txt"
    array.write_text("20\t100\n")
    msg = _error(["train", "--ref", str(panel), "--array", str(array), "--out", str(tmp_path / "m")])
    assert "20:200" in msg and "unphased" in msg and "S1" in msg


def test_array_contig_absent_from_panel(tmp_path, data):
    array = tmp_path / "a.txt"
    array.write_text("21\t9000000\n21\t9000100\n")
    msg = _error(["train", "--ref", str(data / "panel.vcf.gz"), "--array", str(array), "--out", str(tmp_path / "m")])
    assert "none of 2 sites" in msg


def test_target_contig_absent_from_panel(tmp_path, trained):
    target = _vcf(tmp_path / "t.vcf.gz", [(9000151, "T", "C", ["0|1", "1|1"])], contig="21")
    msg = _error(["impute", str(target), "--model", str(trained), "--out", str(tmp_path / "o.vcf.gz")])
    assert "contigs present in the panel" in msg and "21" in msg
    assert not (tmp_path / "o.vcf.gz").exists()


def test_target_without_overlap(tmp_path, trained):
    target = _vcf(tmp_path / "t.vcf.gz", [(9000152, "T", "C", ["0|1", "1|1"])])
    msg = _error(["impute", str(target), "--model", str(trained), "--out", str(tmp_path / "o.vcf.gz")])
    assert "found none of 1" in msg
    assert list(tmp_path.glob("*o.vcf.gz*")) == []


def test_unphased_target_is_phased_first(tmp_path, trained, data):
    require("beagle")  # the phaser impute finds first
    unphased = data / "targets.omni2.5.unphased.vcf.gz"
    msg = _error(["impute", str(unphased), "--model", str(trained), "--phaser", "none", "--out", str(tmp_path / "o.vcf.gz")])
    assert "expected phased genotypes" in msg and not (tmp_path / "o.vcf.gz").exists()
    run(["-q", "impute", str(unphased), "--model", str(trained), "--out", str(tmp_path / "p.vcf.gz")])
    out = cyvcf2.VCF(str(tmp_path / "p.vcf.gz"))
    assert "##genimputePhasing=beagle (its default settings) against " in out.raw_header
    truth = {v.POS: v.genotype.array()[:, :2].sum(axis=1) for v in cyvcf2.VCF(str(unphased))}
    for v in out:
        gts = v.genotype.array()
        assert gts[:, 2].all()  # every call written phased
        if v.POS in truth and not v.INFO.get("IMP"):
            np.testing.assert_array_equal(gts[:, :2].sum(axis=1), truth[v.POS])  # typed genotypes kept


def test_unphased_target_is_phased_by_genimpute_s_own_phaser(tmp_path, trained, data):
    unphased = data / "targets.omni2.5.unphased.vcf.gz"
    run(["-q", "impute", str(unphased), "--model", str(trained), "--phaser", "genimpute",
         "--out", str(tmp_path / "p.vcf.gz")])
    out = cyvcf2.VCF(str(tmp_path / "p.vcf.gz"))
    assert "##genimputePhasing=genimpute (8 rounds, 5 sampled, the last 2 with the cohort, 800 states, seed 1) " \
        "against " in out.raw_header
    unphased_calls = {v.POS: v.genotype.array()[:, :2] for v in cyvcf2.VCF(str(unphased))}
    phased_calls = {v.POS: v.genotype.array() for v in out if v.POS in unphased_calls and not v.INFO.get("IMP")}
    assert len(phased_calls) > 50
    alt_first = 0
    for pos, gts in phased_calls.items():
        assert gts[:, 2].all()  # every call written phased, its genotype kept
        np.testing.assert_array_equal(gts[:, :2].sum(axis=1), unphased_calls[pos].sum(axis=1))
        alt_first += int(((gts[:, 0] == 1) & (gts[:, 1] == 0)).sum())
    assert alt_first > 0  # the unphased file has REF first: the phase is the phaser's


def test_impute_passes_its_genetic_map_to_the_phaser(tmp_path, trained, data):
    require("beagle")  # the phaser impute finds first
    unphased = data / "targets.omni2.5.unphased.vcf.gz"
    other_contig = tmp_path / "chr21.map"
    other_contig.write_text("21\t.\t0.0\t9000000\n21\t.\t1.0\t10000000\n")
    msg = _error(["impute", str(unphased), "--model", str(trained), "--map", str(other_contig),
                  "--out", str(tmp_path / "o.vcf.gz")])
    assert "chr21.map" in msg and "contig 20" in msg and not (tmp_path / "o.vcf.gz").exists()
    chr20 = tmp_path / "chr20.map"
    chr20.write_text("20\t.\t0.0\t9000000\n20\t.\t0.5\t9500000\n")
    run(["-q", "impute", str(unphased), "--model", str(trained), "--map", str(chr20), "--out", str(tmp_path / "p.vcf.gz")])
    assert (tmp_path / "p.vcf.gz").exists()


def _dosages(path):
    return np.concatenate([v.format("DS")[:, 0] for v in cyvcf2.VCF(str(path))])


def test_train_keeps_its_genetic_map_and_impute_reads_one(tmp_path, data):
    """train --map: the model's panel holds the map's cM and its provenance
    names the map; impute uses them, or the map it is given: with no
    recombination anywhere (a flat map) the copying model's dosages change."""
    hotspot = tmp_path / "chr20.map"
    hotspot.write_text("20\t.\t0.0\t9000000\n20\t.\t0.01\t9050000\n20\t.\t2.0\t9060000\n20\t.\t2.01\t9200000\n")
    run(["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--map", str(hotspot), "--out", str(tmp_path / "m"),
         *TINY])
    loaded = load_model_dir(tmp_path / "m")
    assert loaded.provenance["genetic_map"] == str(hotspot)
    np.testing.assert_array_equal(loaded.panel.centimorgans,
                                  ReferencePanel.from_vcf(PANEL).with_genetic_map(hotspot).centimorgans)
    target = str(data / "targets.omni2.5.vcf.gz")
    run(["-q", "impute", target, "--model", str(tmp_path / "m"), "--out", str(tmp_path / "own.vcf.gz")])
    flat = tmp_path / "flat.map"
    flat.write_text("20\t.\t5.0\t9000000\n20\t.\t5.0\t9200000\n")
    run(["-q", "impute", target, "--model", str(tmp_path / "m"), "--map", str(flat),
         "--out", str(tmp_path / "flat.vcf.gz")])
    own, without_recombination = _dosages(tmp_path / "own.vcf.gz"), _dosages(tmp_path / "flat.vcf.gz")
    assert np.abs(own - without_recombination).max() > 0.05


def test_missing_model_directory(tmp_path, data):
    msg = _error(["impute", str(data / "targets.omni2.5.vcf.gz"), "--model", str(tmp_path / "none"),
                  "--out", str(tmp_path / "o.vcf.gz")])
    assert "genimpute train" in msg


def test_truncated_weights(tmp_path, trained, data):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(trained, broken)
    blob = (broken / "model.pt").read_bytes()
    (broken / "model.pt").write_bytes(blob[: len(blob) // 2])
    msg = _error(["impute", str(data / "targets.omni2.5.vcf.gz"), "--model", str(broken), "--out", str(tmp_path / "o.vcf.gz")])
    assert "model.pt" in msg


def test_unknown_backbone_lists_valid_ones(tmp_path, data):
    msg = _error(["train", "--ref", str(data / "panel.vcf.gz"), "--array", str(data / "omni2.5_chr20_9.0-9.1Mb.txt"),
                  "--backbone", "transformerx", "--out", str(tmp_path / "m")])
    assert "msa" in msg


def test_report_path_is_checked_like_the_output(tmp_path, trained, data):
    target = str(data / "targets.omni2.5.vcf.gz")
    msg = _error(["impute", target, "--model", str(trained), "--out", str(tmp_path / "o.vcf.gz"),
                  "--audit", str(tmp_path / "no" / "such" / "dir.tsv")])
    assert "--audit" in msg and "cannot write" in msg and not (tmp_path / "o.vcf.gz").exists()
    existing = tmp_path / "audit.tsv"
    existing.write_text("keep me\n")
    msg = _error(["impute", target, "--model", str(trained), "--out", str(tmp_path / "o.vcf.gz"),
                  "--audit", str(existing)])
    assert "--force" in msg and existing.read_text() == "keep me\n"
