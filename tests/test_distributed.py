"""Data-parallel training: 2 CPU processes (gloo) under torchrun follow the
single-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from cli_helpers import TINY, run
from paths import ARRAY, PANEL


def _train_args(out) -> list[str]:
    return ["train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(out), *TINY]


@pytest.mark.slow
def test_two_processes_match_one(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              "-m", "genimpute", "-q", *_train_args(tmp_path / "ddp"), "--distributed"]
    subprocess.run(launch, check=True, capture_output=True, env=env, timeout=300)
    run(["-q", *_train_args(tmp_path / "single")])

    ddp = torch.load(tmp_path / "ddp" / "model.pt", weights_only=True)["model"]
    single = torch.load(tmp_path / "single" / "model.pt", weights_only=True)["model"]
    assert ddp.keys() == single.keys()
    for name in ddp:
        torch.testing.assert_close(ddp[name], single[name], atol=1e-4, rtol=1e-3, msg=name)

    ddp_prov = json.loads((tmp_path / "ddp" / "provenance.json").read_text())
    single_prov = json.loads((tmp_path / "single" / "provenance.json").read_text())
    assert ddp_prov["processes"] == 2 and single_prov["processes"] == 1
    assert ddp_prov["steps"] == single_prov["steps"]
    for a, b in zip(ddp_prov["history"], single_prov["history"]):
        assert abs(a["query_loss"] - b["query_loss"]) < 1e-4


def test_distributed_flag_needs_torchrun(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    result = run(_train_args(tmp_path / "m") + ["--distributed"], ok=False)
    assert result.exit_code == 1 and "torchrun" in result.output
    assert not (tmp_path / "m").exists()
