"""The default writer: TensorBoard event files."""

from __future__ import annotations

from torch.utils.tensorboard import SummaryWriter

from st_rl.utils.writer_base import Writer


class TensorBoardWriter(SummaryWriter, Writer):
    """``torch.utils.tensorboard.SummaryWriter`` as a :class:`~st_rl.utils.writer_base.Writer` (``logger="tensorboard"``).

    Everything of ``SummaryWriter`` is available; the hooks it has no use for (``log_config``: the config is in
    ``config.json`` beside the event files; ``save_model``; ``save_file``) are the base class's no-ops.
    """
