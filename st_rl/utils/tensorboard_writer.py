"""The default writer: TensorBoard event files."""

from __future__ import annotations

from typing import Any

from st_rl.utils.writer_base import Writer


class TensorBoardWriter(Writer):
    """``SummaryWriter`` as a :class:`~st_rl.utils.writer_base.Writer` (``logger="tensorboard"``); its other
    methods (``add_histogram``, ...) are reached through this object."""

    def __init__(self, log_dir: str, flush_secs: int = 10, **kwargs: Any) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.summary_writer = SummaryWriter(log_dir=log_dir, flush_secs=flush_secs, **kwargs)

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> None:
        self.summary_writer.add_scalar(tag, scalar_value, global_step)

    def flush(self) -> None:
        self.summary_writer.flush()

    def close(self) -> None:
        self.summary_writer.close()

    def __getattr__(self, name: str) -> Any:
        if name == "summary_writer":  # not built yet: no recursion
            raise AttributeError(name)
        return getattr(self.summary_writer, name)
