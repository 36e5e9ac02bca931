"""The public API (genimpute.impute, train, evaluate): what the CLI runs."""

import gzip
import subprocess
import sys

import pytest
from cli_helpers import run
from paths import ARRAY, PANEL, TARGET_PHASED, TARGET_TRUTH

import genimpute
from genimpute.errors import InputError


def _body(path) -> list[str]:
    with gzip.open(path, "rt") as handle:
        return [line for line in handle if not line.startswith(("##fileDate", "##genimputeCommand"))]


def test_impute_writes_what_the_command_writes(tmp_path, monkeypatch):
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--format", "GT:DS",
         "--out", str(tmp_path / "cli.vcf.gz")])
    monkeypatch.chdir(tmp_path)
    summary = genimpute.impute(TARGET_PHASED, ref=PANEL, fields="GT:DS")
    written = tmp_path / "targets.omni2.5.imputed.vcf.gz"  # the command's default name
    assert summary["records_written"] > 100 and written.exists()
    assert _body(written) == _body(tmp_path / "cli.vcf.gz")


def test_impute_refuses_an_unknown_engine():
    with pytest.raises(InputError, match="expected one of auto, copying, model; found fast"):
        genimpute.impute(TARGET_PHASED, ref=PANEL, engine="fast")


@pytest.mark.parametrize("settings, said", [
    ({"stepz": 3}, "found stepz"), ({"name": "msa"}, "found name"), ({"maf_weight": -1}, "maf_weight must be >= 0"),
    ({"model": "npssm", "heads": 2},
     "npssm settings: expected among dim, layers, ffn_mult, max_columns, evidence, body_rows, local_columns, unsure, state; found heads"),
    ({"model": "msa", "untyped": 400, "typed": 200}, "msa window: expected at most max_columns = 512 columns"),
    ({"init": "pretrained", "neighbours": 4}, "match settings: .*found neighbours")])
def test_train_names_a_setting_it_cannot_take_before_reading_the_panel(tmp_path, settings, said):
    with pytest.raises(InputError, match=said):
        genimpute.train(PANEL, ARRAY, tmp_path / "model", **settings)
    assert not (tmp_path / "model").exists()


def test_a_model_flag_the_backbone_does_not_read_is_one_error_line(tmp_path):
    result = run(["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(tmp_path / "model"),
                  "--backbone", "msa", "--rows-per-gap", "4"], ok=False)
    assert result.exit_code == 1 and result.output == ("genimpute: error: msa settings: expected among dim, layers, "
                                                       "ffn_mult, max_columns, evidence, body_rows, local_columns, unsure, heads; found "
                                                       "rows_per_gap\n")
    assert not (tmp_path / "model").exists()


def test_evaluate_scores_an_imputed_file(tmp_path):
    out = tmp_path / "imputed.vcf.gz"
    genimpute.impute(TARGET_PHASED, out, ref=PANEL)
    overall = genimpute.evaluate(TARGET_TRUTH, out, labels=["copying"], ref=PANEL).overall()
    assert list(overall.index) == ["copying"]
    assert 0.5 < overall.loc["copying", "aggregate_r2"] <= 1


def test_import_genimpute_loads_neither_torch_nor_numba():
    code = "import sys, genimpute; print(sorted(m for m in ('torch', 'numba') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
