"""Multi-layer perceptron."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from st_rl.modules.utils import get_activation_Cls


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
            out_cls = get_activation_Cls(output_activation)
            if out_cls is None:
                raise ValueError(f"Unknown output activation {output_activation!r}")
            layers.append(out_cls())
    return layers


class MlpModel(nn.Module):
    """MLP: each hidden layer is ``Linear`` + activation; ``output_size`` adds a final plain ``Linear``.

    Args:
        input_size: input width.
        hidden_sizes: a list, a single int, or ``None`` for no hidden layer.
        output_size: width of the final linear layer; ``None`` makes the last hidden layer the output.
        nonlinearity: activation class or name (``"elu"``, ``"ReLU"``, ...).
    """

    def __init__(
        self,
        input_size: int,
        hidden_sizes: Sequence[int] | int | None,
        output_size: int | None = None,
        nonlinearity: str | type[nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        if isinstance(hidden_sizes, int):
            hidden_sizes = [hidden_sizes]
        hidden_sizes = list(hidden_sizes or [])
        if not hidden_sizes and output_size is None:
            raise ValueError("MlpModel needs hidden_sizes or output_size.")
        self.model = nn.Sequential(*mlp_layers(input_size, hidden_sizes, output_size, nonlinearity))
        self._output_size = int(output_size) if output_size is not None else int(hidden_sizes[-1])
        self.input_size = int(input_size)

    @property
    def output_size(self) -> int:
        """Width of the output."""
        return self._output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)
