"""Training on several panels and on random array densities, and imputing
from a panel given with --ref instead of the model directory's own."""

import gzip

import numpy as np
import pytest
import torch
from cli_helpers import TINY, run
from paths import ARRAY, PANEL, TARGET_PHASED
from tools import run_tool
from vcf_edit import read_lines

from genimpute.config import RunConfig, TrainConfig, WindowConfig
from genimpute.errors import CheckpointError, InputError
from genimpute.modeldir import PANEL as PANEL_FILE
from genimpute.modeldir import load_model_dir
from genimpute.models.match import MatchConfig
from genimpute.panel import ReferencePanel
from genimpute.training import train
from genimpute.training_set import TrainingSet


@pytest.fixture(scope="module")
def halves(tmp_path_factory):
    """The test panel cut in two at 9.05 Mb: two panels of one array."""
    d = tmp_path_factory.mktemp("halves")
    paths = []
    for name, region in (("left", "20:9000000-9050000"), ("right", "20:9050001-9100000")):
        path = d / f"{name}.vcf.gz"
        run_tool(["bcftools", "view", "-r", region, "-Oz", "-o", str(path), str(PANEL)], check=True)
        run_tool(["tabix", "-p", "vcf", str(path)], check=True)
        paths.append(path)
    return paths


def test_random_density_keeps_a_share_of_the_array_typed_and_imputes_the_rest(training_set):
    ts = training_set
    dropped = 0
    for seed in range(40):
        full = ts.random_window(np.random.default_rng(seed), 40, 30)
        assert not ts.typed_mask[full.predicted].any()
        window = ts.random_window(np.random.default_rng(seed), 40, 30, min_density=0.3)
        assert ts.typed_mask[window.columns[window.typed]].all()  # evidence only at array sites
        assert 0 < window.typed.sum() <= 30 and (~window.typed).sum() == 40
        dropped += int(ts.typed_mask[window.predicted].sum())  # array sites imputed, as on a sparser array
    assert dropped > 0


def test_a_vcf_panel_is_read_through_a_spool_into_memory_as_a_compact_one(tmp_path, monkeypatch):
    from genimpute import training_set

    compact = tmp_path / "panel.gpanel"
    run(["-q", "panel", str(PANEL), "--out", str(compact)])
    spooled = []

    class Spool(training_set.SparseSpool):
        def append(self, block):
            spooled.append(len(block))
            super().append(block)

    monkeypatch.setattr(training_set, "SparseSpool", Spool)
    (from_vcf, _), (from_compact, _) = training_set.training_panels([PANEL, compact], [ARRAY, ARRAY], None, tmp_path)
    assert sum(spooled) == len(from_vcf)  # the VCF's records went through the spool, the compact panel's did not
    for panel in (from_vcf, from_compact):  # in memory, the rare records listed
        assert isinstance(panel.packed.whole, np.ndarray) and isinstance(panel.packed.positions, np.ndarray)
    assert np.array_equal(from_vcf.packed[:], from_compact.packed[:])


def test_min_array_density_must_be_a_share():
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ValueError, match="min_array_density"):
            TrainConfig(min_array_density=bad)


def test_training_on_two_panels_draws_windows_from_both_and_keeps_no_panel(halves, tmp_path, monkeypatch):
    drawn = []
    original = TrainingSet.random_window

    def recording(self, *args, **kwargs):
        drawn.append(int(self.panel.positions[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TrainingSet, "random_window", recording)
    out = tmp_path / "m"
    run(["-q", "train", "--ref", str(halves[0]), "--ref", str(halves[1]), "--array", str(ARRAY),
         "--min-array-density", "0.5", "--out", str(out), *TINY])
    assert len(set(drawn)) == 2  # training (and validation) windows came from each panel
    assert not (out / PANEL_FILE).exists()
    with pytest.raises(CheckpointError, match="--ref"):
        load_model_dir(out)
    loaded = load_model_dir(out, ReferencePanel.from_vcf(PANEL))
    assert loaded.config.train.min_array_density == 0.5
    panels = loaded.provenance["panels"]
    assert [p["panel"] for p in panels] == [str(h) for h in halves]
    assert all(p["typed_sites"] > 0 and p["validation_samples"] for p in panels)


def test_array_count_must_match_the_panels(halves, tmp_path):
    result = run(["train", "--ref", str(halves[0]), "--ref", str(halves[1]), "--ref", str(PANEL),
                  "--array", str(ARRAY), "--array", str(ARRAY), "--out", str(tmp_path / "m"), *TINY], ok=False)
    assert result.exit_code == 1 and "one array for every panel or one per --ref" in result.output
    assert not (tmp_path / "m").exists()


def test_resume_refuses_another_set_of_panels(halves, tmp_path):
    config = RunConfig(window=WindowConfig(untyped=40, typed=30, context=8), model=MatchConfig(),
                       train=TrainConfig(steps=2, checkpoint_every=1, validate_every=2, val_windows=2))
    train(halves, ARRAY, tmp_path / "m", config, torch.device("cpu"), progress=False)
    with pytest.raises(CheckpointError, match="other panels"):
        train(halves[:1], ARRAY, tmp_path / "m", config, torch.device("cpu"), resume=True, progress=False)
    with pytest.raises(InputError, match="one array"):
        train(halves, [ARRAY, ARRAY, ARRAY], tmp_path / "n", config, torch.device("cpu"))


def test_ref_gives_the_records_of_the_models_own_panel(trained, tmp_path):
    own, given = tmp_path / "own.vcf.gz", tmp_path / "given.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--model", str(trained), "--out", str(own)])
    run(["-q", "impute", str(TARGET_PHASED), "--model", str(trained), "--ref", str(PANEL), "--out", str(given)])
    assert read_lines(own)[1] == read_lines(given)[1]
    with gzip.open(given, "rt") as handle:
        assert f"##genimputeReference={PANEL.resolve()}" in handle.read()
