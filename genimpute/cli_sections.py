"""`--help` with its options under headings (inputs, outputs, engine, ...),
as bcftools and plink2 group theirs, in place of click's one flat list."""

from __future__ import annotations

import click


class SectionedCommand(click.Command):
    """A command whose `sections` ({heading: [parameter names]}) order its
    options in `--help`; options named in no section come last, under
    "Other options"."""

    def __init__(self, *args, sections: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sections = sections or {}

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx) if isinstance(p, click.Option)}
        placed = set()
        for heading, names in self.sections.items():
            rows = [records[name] for name in names if records.get(name)]
            placed.update(names)
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)
        rest = [record for name, record in records.items() if record and name not in placed]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)
