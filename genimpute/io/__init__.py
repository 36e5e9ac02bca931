"""File formats: VCF/BCF reading, array marker lists, imputed VCF writing.
Nothing here imports torch."""
