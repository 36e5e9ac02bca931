from pathlib import Path

import pytest
from cli_helpers import TINY, run
from paths import ARRAY, DATA, PANEL

from genimpute.io.array_list import read_array_list
from genimpute.panel import ReferencePanel, array_typed_mask
from genimpute.training_set import TrainingSet


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> Path:
    """A tiny model trained on the tests/data slice (shared by every test module)."""
    d = tmp_path_factory.mktemp("model")
    run(["-q", "train", "--ref", str(PANEL), "--array", str(ARRAY), "--out", str(d / "model"), *TINY])
    return d / "model"


@pytest.fixture(scope="session")
def training_set() -> TrainingSet:
    """The tests/data panel and array as training sees them (10% of samples held out)."""
    panel = ReferencePanel.from_vcf(PANEL)
    return TrainingSet(panel, array_typed_mask(panel, read_array_list(ARRAY)), 0.1, seed=3)
