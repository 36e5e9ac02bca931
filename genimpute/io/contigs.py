"""Contig naming: `20`, `chr20` and `CHR20` name the same chromosome."""


def normalise_contig(name: str) -> str:
    """Key used to match contigs across files whatever their naming style."""
    key = name[3:] if name[:3].lower() == "chr" else name
    return "MT" if key == "M" else key


def is_autosome(name: str) -> bool:
    """A numbered chromosome (`20`, `chr20`): diploid in every sample."""
    return normalise_contig(name).isdigit()
