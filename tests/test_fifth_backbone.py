"""A fifth backbone needs its own class and config and a registry entry,
nothing else: one defined here, registered by name, trains, resumes its
model directory and imputes through the same commands as the four shipped
ones."""

import gzip
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from cli_helpers import run
from paths import ARRAY, PANEL, TARGET_PHASED
from torch import nn

from genimpute import models
from genimpute.config import ALT, BackboneConfig, WindowConfig
from genimpute.modeldir import load_model_dir


@dataclass(frozen=True)
class VoteConfig(BackboneConfig):
    """ContextVote's settings: those every backbone has, the starting scale its own."""

    name = "vote"
    scale: float = 4.0


class ContextVote(nn.Module):
    """Each cell's alt logit from the share of the query's context rows
    carrying the alt allele there, through one learned scale and offset: the
    smallest model of the nearest-context interface."""

    shares_context = False
    reconstructs_context = False
    default_window = WindowConfig(untyped=40, typed=30, context=8)
    queries_per_cpu_pass = 16

    def __init__(self, config: VoteConfig):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(config.scale))
        self.offset = nn.Parameter(torch.tensor(-2.0))

    def forward(self, tokens: torch.Tensor, typed: torch.Tensor, genetic=None) -> torch.Tensor:
        # tokens (B, R, M): row 0 the query, rows 1.. its context -> logits (B, R, M)
        alt_share = (tokens[:, 1:] == ALT).float().mean(dim=1, keepdim=True)  # (B, 1, M)
        return (self.scale * alt_share + self.offset).expand(tokens.shape).contiguous()

    def query_logits(self, tokens: torch.Tensor, typed: torch.Tensor, genetic=None) -> torch.Tensor:
        return self.forward(tokens, typed)[:, 0][:, ~typed]


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(models.REGISTRY, "vote", models.Backbone(ContextVote, VoteConfig))


def test_a_backbone_registered_by_name_trains_resumes_and_imputes(registered, tmp_path):
    model_dir = tmp_path / "model"
    args = ["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(model_dir), "--backbone", "vote",
            "--batch-size", "4", "--checkpoint-every", "4", "--validate-every", "4"]
    run([*args, "--steps", "4"])
    run([*args, "--steps", "8", "--resume"])
    loaded = load_model_dir(model_dir)
    assert isinstance(loaded.model, ContextVote) and loaded.provenance.steps == 8
    assert loaded.config.window == ContextVote.default_window  # the backbone's own geometry
    assert loaded.config.model == VoteConfig()  # and its own settings, stored and read back
    out = tmp_path / "vote.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--model", str(model_dir), "--out", str(out)])
    with gzip.open(out, "rt") as handle:
        imputed = [line.split("\t") for line in handle if not line.startswith("#") and ";IMP" in line]
    assert len(imputed) > 100
    dosages = np.array([[float(cell.split(":")[1]) for cell in record[9:]] for record in imputed])
    assert dosages.min() >= 0 and dosages.max() <= 2 and len(np.unique(dosages)) > 5


def test_an_unknown_backbone_is_refused_with_the_registered_names(registered, tmp_path):
    result = run(["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(tmp_path / "m"),
                  "--model", "votes"], ok=False)
    assert result.exit_code == 1 and "vote" in result.output and "match" in result.output
