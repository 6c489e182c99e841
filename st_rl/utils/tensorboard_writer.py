"""The default writer at its documented path: :class:`st_rl.utils.writers.TensorBoardWriter`."""

from st_rl.utils.writers import TensorBoardWriter

__all__ = ["TensorBoardWriter"]
