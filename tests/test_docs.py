"""The documentation that is generated from the code matches it."""

import runpy
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_cli_page_is_the_code_s_help():
    page = runpy.run_path(str(ROOT / "scripts" / "cli_docs.py"))["page"]()
    assert (ROOT / "docs" / "cli.md").read_text() == page, "docs/cli.md is stale: run `make docs`"


def test_every_option_has_a_one_line_help():
    import click

    from genimpute.cli import main

    options = [(name, opt) for name, command in main.commands.items() for opt in command.params
               if isinstance(opt, click.Option) and not opt.hidden]
    long = [f"{name} {opt.opts[0]}" for name, opt in options if opt.help is None or len(opt.help) > 100]
    assert not long, f"expected a help text of at most 100 characters for every option; found {long}"
