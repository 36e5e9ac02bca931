"""benchmarks/heldout_phasing.py: the settings --genimpute names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from genimpute.config import CopyingSettings, PhasingSettings

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from heldout_phasing import settings_of  # noqa: E402


def test_genimpute_settings_name_fields_of_either_class():
    assert settings_of("") == (PhasingSettings(), CopyingSettings())
    phasing, copying = settings_of("sampled_rounds=0,error=0.01,neighbours=8,sight_every=4")
    assert phasing == PhasingSettings(sampled_rounds=0, error=0.01)
    assert copying == CopyingSettings(neighbours=8, sight_every=4)
    with pytest.raises(SystemExit, match="expected fields of PhasingSettings or CopyingSettings; found states"):
        settings_of("states=3")
