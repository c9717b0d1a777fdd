"""The release of fair-retrieval, as `pyproject.toml` gives it (a leaf: files that record it import it from here)."""

__version__ = "0.1.0"
