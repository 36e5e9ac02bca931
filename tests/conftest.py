from pathlib import Path

import pytest
from cli_helpers import TINY, run
from paths import ARRAY, DATA, PANEL


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
