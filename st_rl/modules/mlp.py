"""Multi-layer perceptron."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from st_rl.modules.utils import get_activation, get_activation_Cls
from st_rl.utils.precision import autocast_enabled


def mlp_layers(
    input_size: int,
    hidden_sizes: Sequence[int],
    output_size: int | None,
    nonlinearity: str | type[nn.Module] = nn.ReLU,
    output_activation: str | type[nn.Module] | None = None,
) -> list[nn.Module]:
    """Layers of an MLP: ``Linear + activation`` per hidden size, then an optional linear head."""
    act_cls = get_activation_Cls(nonlinearity)
    if act_cls is None:
        raise ValueError(f"Unknown nonlinearity {nonlinearity!r}")
    layers: list[nn.Module] = []
    last = input_size
    for size in hidden_sizes:
        layers += [nn.Linear(last, int(size)), act_cls()]
        last = int(size)
    if output_size is not None:
        layers.append(nn.Linear(last, int(output_size)))
        if output_activation is not None:
            layers.append(get_activation(output_activation))
    return layers


class PolicyHead(nn.Sequential):
    """An MLP (``nn.Sequential``) whose output layer runs in float32 under autocast, so that action means and
    values keep float32 resolution with ``precision="bf16"`` (bfloat16 resolves a value of 5 only to 0.03).
    ``torch.jit.script`` compiles it as the plain MLP."""

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__(*layers)
        linear = [i for i, m in enumerate(layers) if isinstance(m, nn.Linear)]
        self._output_start = linear[-1] if linear else len(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        if torch.jit.is_scripting():
            # TorchScript resolves this statically: the scripted head is the plain MLP (eager, no autocast)
            for layer in self:
                x = layer(x)
            return x
        device_type = x.device.type
        if not autocast_enabled(device_type):
            return super().forward(x)
        layers = iter(self)  # the current modules (layers may be swapped in place, e.g. activations)
        for _ in range(self._output_start):
            x = next(layers)(x)
        with torch.autocast(device_type, enabled=False):
            x = x.float()
            for layer in layers:
                x = layer(x)
        return x


class MlpModel(nn.Module):
    """MLP: ``Linear`` + activation per hidden size (a list, an int or None), then a plain ``Linear`` of
    ``output_size`` (None: the last hidden layer is the output)."""

    def __init__(
        self,
        input_size: int,
        hidden_sizes: Sequence[int] | int | None,
        output_size: int | None = None,
        nonlinearity: str | type[nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        hidden_sizes = [hidden_sizes] if isinstance(hidden_sizes, int) else list(hidden_sizes or [])
        if not hidden_sizes and output_size is None:
            raise ValueError("MlpModel needs hidden_sizes or output_size.")
        self.model = nn.Sequential(*mlp_layers(input_size, hidden_sizes, output_size, nonlinearity))
        self.output_size = int(output_size) if output_size is not None else int(hidden_sizes[-1])
        self.input_size = int(input_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)
