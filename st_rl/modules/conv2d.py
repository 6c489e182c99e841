"""Convolutional encoders for image observations (e.g. depth images)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from st_rl.modules.mlp import MlpModel
from st_rl.modules.utils import conv2d_output_shape, get_activation

_NORMS = {"batchnorm": nn.BatchNorm2d, "bn": nn.BatchNorm2d, "instancenorm": nn.InstanceNorm2d}


def _norm_layer(normlayer: str | type[nn.Module] | None, channels: int) -> nn.Module | None:
    if isinstance(normlayer, str):
        if normlayer.lower() in ("layernorm", "groupnorm", "ln"):
            return nn.GroupNorm(1, channels)  # LayerNorm over (C, H, W), independent of the resolution
        cls = _NORMS.get(normlayer.lower().removesuffix("2d")) or getattr(nn, normlayer, None)
        if cls is None:
            raise ValueError(f"Unknown normlayer {normlayer!r}; use 'batchnorm', 'layernorm', 'instancenorm'")
        return cls(channels)
    return None if normlayer is None else normlayer(channels)


class Conv2dModel(nn.Module):
    """``Conv2d [-> normlayer] -> activation`` blocks; ``use_maxpool``: stride 1 and a ``MaxPool2d`` of the stride
    instead. ``normlayer``: ``"batchnorm"``, ``"layernorm"``, ``"instancenorm"``, a ``torch.nn`` name or class;
    ``head_sizes`` is unused (the reference's signature)."""

    def __init__(
        self,
        in_channels: int,
        channels: Sequence[int],
        kernel_sizes: Sequence[int],
        strides: Sequence[int],
        paddings: Sequence[int] | None = None,
        nonlinearity: str | type[nn.Module] = nn.ReLU,
        use_maxpool: bool = False,
        head_sizes: Sequence[int] | None = None,
        normlayer: str | type[nn.Module] | None = None,
    ) -> None:
        super().__init__()
        paddings = list(paddings) if paddings is not None else [0] * len(channels)
        if not len(channels) == len(kernel_sizes) == len(strides) == len(paddings):
            raise ValueError("channels, kernel_sizes, strides and paddings must have the same length")
        act_cls = type(get_activation(nonlinearity))
        self.kernel_sizes, self.strides, self.paddings = list(kernel_sizes), list(strides), paddings
        self.use_maxpool = use_maxpool
        layers: list[nn.Module] = []
        last = in_channels
        for ch, k, s, p in zip(channels, kernel_sizes, strides, paddings):
            layers.append(nn.Conv2d(last, ch, kernel_size=k, stride=1 if use_maxpool else s, padding=p))
            norm = _norm_layer(normlayer, ch)
            if norm is not None:
                layers.append(norm)
            layers.append(act_cls())
            if use_maxpool and s > 1:
                layers.append(nn.MaxPool2d(s))
            last = ch
        self.conv = nn.Sequential(*layers)
        self.out_channels = last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)

    def conv_out_resolution(self, h: int, w: int) -> tuple[int, int]:
        """Spatial size after the convolutions for an ``h x w`` input."""
        for k, s, p in zip(self.kernel_sizes, self.strides, self.paddings):
            if self.use_maxpool:
                h, w = conv2d_output_shape(h, w, k, 1, p)
                if s > 1:
                    h, w = h // s, w // s
            else:
                h, w = conv2d_output_shape(h, w, k, s, p)
        return h, w

    def conv_out_size(self, h: int, w: int) -> int:
        """Flattened output size for an ``h x w`` input."""
        oh, ow = self.conv_out_resolution(h, w)
        return self.out_channels * oh * ow


class Conv2dHeadModel(nn.Module):
    """``Conv2dModel``, flattening and an ``MlpModel`` head (identity without sizes); input ``(..., C, H, W)``."""

    def __init__(
        self,
        image_shape: Sequence[int],
        channels: Sequence[int],
        kernel_sizes: Sequence[int],
        strides: Sequence[int],
        hidden_sizes: Sequence[int] | int | None,
        output_size: int | None = None,
        paddings: Sequence[int] | None = None,
        nonlinearity: str | type[nn.Module] = nn.ReLU,
        use_maxpool: bool = False,
        normlayer: str | type[nn.Module] | None = None,
    ) -> None:
        super().__init__()
        c, h, w = (int(v) for v in image_shape)
        self.image_shape = (c, h, w)
        self.conv = Conv2dModel(
            c, channels, kernel_sizes, strides, paddings, nonlinearity, use_maxpool, None, normlayer
        )
        conv_size = self.conv.conv_out_size(h, w)
        if conv_size <= 0:
            raise ValueError(f"Convolutions reduce a {h}x{w} image to nothing: use smaller kernels/strides")
        has_head = bool(hidden_sizes) or output_size is not None
        mlp = MlpModel(conv_size, hidden_sizes, output_size, nonlinearity) if has_head else None
        self.head: nn.Module = mlp if mlp is not None else nn.Identity()
        self.output_size = mlp.output_size if mlp is not None else conv_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-3]
        y = self.conv(x.reshape(-1, *x.shape[-3:]))
        y = self.head(y.flatten(1))
        return y.reshape(*lead, y.shape[-1])
