"""Data: the canonical container, preprocessing, benchmark systems and I/O."""
from .container import Arrays, as_dataset, to_arrays

__all__ = ["Arrays", "as_dataset", "to_arrays"]
