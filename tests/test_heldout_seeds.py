"""benchmarks/heldout_seeds.py and heldout_large_panel.py's errors.json: a
lever's error by bin over several seeds' held-out directories."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from heldout_large_panel import record_errors  # noqa: E402
from heldout_seeds import read_errors, report  # noqa: E402

from genimpute.evaluation import BIN_LABELS  # noqa: E402


def _record(directory: Path, errors: dict) -> None:
    directory.mkdir()
    (directory / "errors.json").write_text(json.dumps(errors))


def test_the_ratio_over_seeds_is_the_geometric_mean_of_each_seeds(tmp_path, capsys):
    bins = len(BIN_LABELS)
    _record(tmp_path / "s1", {"copying": [0.1] * bins, "lever": [0.08] * bins})
    _record(tmp_path / "s2", {"copying": [0.1] * bins, "lever": [0.125] * bins})
    directories = [str(tmp_path / "s1"), str(tmp_path / "s2")]
    errors = read_errors(directories, ["copying", "lever"])
    assert errors["lever"].shape == (2, bins)
    report(directories, errors, "copying")
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("lever / copying, geometric mean over 2 seeds")
    assert f"{BIN_LABELS[0]} 1.000 [" in summary  # 0.8 and 1.25 cancel


def test_a_seed_without_the_tool_is_refused(tmp_path):
    _record(tmp_path / "s1", {"copying": [0.1] * len(BIN_LABELS)})
    with pytest.raises(SystemExit, match="expected lever"):
        read_errors([str(tmp_path / "s1")], ["copying", "lever"])


def test_errors_json_keeps_earlier_tools_and_updates_rerun_ones(tmp_path):
    rng = np.random.default_rng(1)
    truth = rng.binomial(2, 0.3, size=(14, 10)).astype(np.float64)
    bins = np.arange(14) % len(BIN_LABELS)
    path = tmp_path / "errors.json"
    record_errors(path, {"beagle": truth + 0.1, "copying": truth * 0.5}, truth, bins)
    record_errors(path, {"copying": truth.copy()}, truth, bins)
    recorded = json.loads(path.read_text())
    assert set(recorded) == {"beagle", "copying"}
    assert recorded["copying"] == pytest.approx([0.0] * len(BIN_LABELS))
