"""The pretrained model shipped in the package: small, it says what it was
trained on, and it imputes real data from a region it never saw, with no
train step."""

import gzip
from pathlib import Path

import pytest
import torch
from cli_helpers import TINY, run
from paths import ARRAY, DATA, PANEL, TARGET_PHASED

from genimpute.evaluation import evaluate
from genimpute.modeldir import PANEL as PANEL_FILE
from genimpute.modeldir import PRETRAINED_DIR, load_model_dir
from genimpute.models import default_window
from genimpute.panel import ReferencePanel

# how far below Beagle 5.4's aggregate r2 on the test slice (10 targets) the pretrained
# model may fall here; docs/results.md has the figures on the whole benchmark
MAX_GAP_TO_BEAGLE = 0.02


def test_pretrained_model_is_small_has_no_panel_and_names_its_training_data():
    files = sorted(p.name for p in PRETRAINED_DIR.iterdir() if not p.name.startswith("."))
    assert files == ["config.json", "model.pt", "provenance.json"] and PANEL_FILE not in files
    assert sum((PRETRAINED_DIR / f).stat().st_size for f in files) < 5 * 2**20
    loaded = load_model_dir(PRETRAINED_DIR, ReferencePanel.from_vcf(PANEL))
    trained_on = [Path(p["panel"]).name for p in loaded.provenance["panels"]]
    # the simulated panel and HapMap CEU less chr20:8-12 Mb; no 1000 Genomes panel, which the slice is from
    assert trained_on == ["panel.vcf.gz", "hapmap_ceu_chr20.not8-12Mb.bcf"]
    assert "sim_ooa_chr20_5Mb" in loaded.provenance["panels"][0]["panel"]
    assert loaded.provenance["finished"] and loaded.provenance["steps"] > 0


@pytest.mark.parametrize("engine, header", [([], "copying engine ("),
                                            (["--engine", "model"], f"{PRETRAINED_DIR.resolve()} (match,")])
def test_impute_with_ref_and_no_model_uses_the_copying_engine_or_the_pretrained_model(tmp_path, monkeypatch, engine,
                                                                                       header):
    monkeypatch.setenv("GENIMPUTE_MODEL", str(tmp_path / "no-such-model"))  # --ref alone ignores it
    out = tmp_path / "pretrained.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(out), *engine])
    with gzip.open(out, "rt") as handle:
        assert f"##genimputeModel={header}" in handle.read()
    scores = evaluate(DATA / "targets.truth.vcf.gz", [out, DATA / "beagle.imputed.vcf.gz"], ["pretrained", "beagle"],
                      PANEL).overall()["aggregate_r2"]
    assert scores["pretrained"] >= scores["beagle"] - MAX_GAP_TO_BEAGLE


def test_train_from_the_pretrained_weights_takes_its_model_and_weights(tmp_path):
    out = tmp_path / "tuned"
    # lr 0: the weights stay those the run started from
    run(["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(out), *TINY, "--lr", "0",
         "--init", "pretrained"])
    tuned = load_model_dir(out)
    pretrained = load_model_dir(PRETRAINED_DIR, tuned.panel)
    assert tuned.config.model == pretrained.config.model  # not TINY's --dim 16 --layers 1
    assert tuned.config.window.untyped == 40  # the window is this run's
    assert tuned.provenance["initialised_from"] == str(PRETRAINED_DIR)
    for name, weights in pretrained.model.state_dict().items():
        assert torch.equal(weights, tuned.model.state_dict()[name]), name


def test_train_from_another_model_takes_that_backbones_default_window(tmp_path, trained):
    """--init's backbone replaces --model's, and so do its default U, T and k."""
    out = tmp_path / "from_match"
    run(["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(out), "--backbone", "msa",
         "--init", str(trained), "--steps", "1", "--batch-size", "2", "--validate-every", "1"])
    config = load_model_dir(out).config
    assert config.model.name == "match"
    assert config.window == default_window("match")
