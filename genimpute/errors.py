"""Typed errors. The CLI turns each into one clear line and a non-zero exit."""


class GenimputeError(Exception):
    """Base class for every error genimpute reports to the user."""


class InputError(GenimputeError):
    """An input file is missing, malformed or not what the command expects."""


class PanelMismatchError(GenimputeError):
    """Target or array does not line up with the reference panel."""


class CheckpointError(GenimputeError):
    """A model directory or checkpoint is missing, corrupted or incompatible."""
