"""Running the genimpute CLI in-process from tests."""

from click.testing import CliRunner

from genimpute.cli import main

# a model small enough to train in seconds on the tests/data slice
TINY = ["--steps", "12", "--dim", "16", "--heads", "2", "--layers", "1", "--untyped", "40",
        "--typed", "30", "--context", "8", "--batch-size", "4", "--checkpoint-every", "4", "--validate-every", "6"]


def run(args, ok=True):
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result
