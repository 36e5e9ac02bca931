"""An installation without the learned extra (no PyTorch) imputes with the
copying engine exactly as the full one does, and a command that needs
PyTorch says which extra to install."""

import gzip
import subprocess
import sys
from pathlib import Path

from paths import ARRAY, PANEL, TARGET_PHASED, TARGET_UNPHASED

WITHOUT_TORCH = Path(__file__).parent / "without_torch.py"


def _genimpute(*args, torch=True):
    launcher = ["-m", "genimpute"] if torch else [str(WITHOUT_TORCH)]
    return subprocess.run([sys.executable, *launcher, "-q", *map(str, args)], capture_output=True, text=True)


def _records(path: Path) -> list[str]:
    with gzip.open(path, "rt") as handle:
        return [line for line in handle if not line.startswith("##")]


def test_the_copying_engine_and_phaser_need_no_torch(tmp_path):
    for target in (TARGET_PHASED, TARGET_UNPHASED):
        light, full = tmp_path / "light.vcf.gz", tmp_path / "full.vcf.gz"
        for out, torch in ((light, False), (full, True)):
            result = _genimpute("impute", target, "--ref", PANEL, "--phaser", "genimpute", "--out", out, "--force",
                                torch=torch)
            assert result.returncode == 0, result.stderr
        assert _records(light) == _records(full)


def test_a_command_that_needs_torch_names_the_extra(tmp_path):
    train = _genimpute("train", "--ref", PANEL, "--array", ARRAY, "--out", tmp_path / "model", torch=False)
    model = _genimpute("impute", TARGET_PHASED, "--ref", PANEL, "--engine", "model", "--out", tmp_path / "o.vcf.gz",
                       torch=False)
    for result in (train, model):
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [result.stderr.strip()]
        assert "pip install 'genimpute[learned]'" in result.stderr
