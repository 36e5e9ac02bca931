"""Rules on the package's source that nothing else would catch: comments
say why the code is as it is, not which journal entry measured it (those
references go stale as the journal moves; the figures live in
docs/results.md), and no function grows past what a reader takes in at
once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "genimpute"
JOURNAL_REFERENCE = re.compile(r"\b(stop|issue) [0-9]+", re.IGNORECASE)
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_source_refers_to_a_journal_stop_or_issue():
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in _sources()
             for number, line in enumerate(path.read_text().splitlines(), 1) if JOURNAL_REFERENCE.search(line)]
    assert not found, "references to a stop or an issue:\n" + "\n".join(found)


def test_no_function_is_longer_than_sixty_lines():
    """From the def line (decorators excluded) to the last line, docstring included."""
    too_long = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}: "
                f"{node.end_lineno - node.lineno + 1} lines"
                for path in _sources()
                for node in ast.walk(ast.parse(path.read_text(), str(path)))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(too_long)
