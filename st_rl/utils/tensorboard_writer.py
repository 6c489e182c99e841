"""The default writer: TensorBoard event files."""

from __future__ import annotations

from typing import Any

from st_rl.utils.writer_base import CustomWriter


class TensorBoardWriter(CustomWriter):
    """``SummaryWriter`` (``summary_writer``, its methods reached through this object) as a ``logger="tensorboard"``."""

    def __init__(self, log_dir: str, flush_secs: int = 10, **kwargs: Any) -> None:
        from torch.utils.tensorboard import SummaryWriter

        super().__init__(SummaryWriter(log_dir=log_dir, flush_secs=flush_secs, **kwargs))
        self.summary_writer = self.writer
