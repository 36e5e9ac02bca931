"""Print docs/cli.md: every command's --help, as the code gives it.

    python scripts/cli_docs.py > docs/cli.md     (make docs)

tests/test_docs.py fails when docs/cli.md differs from this output, so the
page cannot drift from the options the code has."""

from __future__ import annotations

import click

from genimpute.cli import main

WIDTH = 100  # a fixed width, so the page does not depend on the terminal that made it

INTRO = """# genimpute command line

Generated from the code by `scripts/cli_docs.py` (`make docs`); do not edit.
How the engines work: [how-it-works.md](how-it-works.md). Measured figures:
[results.md](results.md).

Every command turns bad input into one `genimpute: error:` line and exit
status 1, writes its outputs whole or not at all, and takes `-q` (warnings
and errors only) and `-v` (more) before the command's name.
"""


def help_text(command: click.Command, name: str, parent: click.Context | None = None) -> str:
    ctx = click.Context(command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH)
    return command.get_help(ctx)


def page() -> str:
    # the group's own settings (its -h), as when the command line is run
    root = click.Context(main, info_name="genimpute", terminal_width=WIDTH, max_content_width=WIDTH,
                         **main.context_settings)
    parts = [INTRO, "## genimpute\n", "```text", main.get_help(root), "```\n"]
    for name in main.list_commands(root):
        parts += [f"## genimpute {name}\n", "```text", help_text(main.get_command(root, name), name, root), "```\n"]
    return "\n".join(parts)


if __name__ == "__main__":
    print(page(), end="")
