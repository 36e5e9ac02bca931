"""benchmarks/heldout_phasing.py: the settings --genimpute names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from genimpute.config import PhasingSettings

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from heldout_phasing import settings_of  # noqa: E402


def test_genimpute_settings_name_phasing_fields():
    assert settings_of("") == PhasingSettings()
    assert settings_of("sampled_rounds=0,error=0.01,neighbours=8,ne=4e5") == \
        PhasingSettings(sampled_rounds=0, error=0.01, neighbours=8, ne=4e5)
    with pytest.raises(SystemExit, match="expected fields of PhasingSettings; found max_states"):
        settings_of("max_states=3")
