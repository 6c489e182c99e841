"""How st_gym (an Isaac Lab project that trains with st_rl) exports its policies, emulated for client tests.

st_gym ships its own exporter: it copies the parts of a trained policy it needs (``actor``, the actor memory's
``rnn``, the first encoder, the observation normaliser) into a small ``nn.Module`` and writes it with
``torch.jit.script(...).save`` or ``torch.onnx.export``. It reads these attributes of the policy, so they are
the interface st_rl must keep:

* ``actor`` (its ``[0]`` is the first ``nn.Linear``), ``is_recurrent`` and ``rnn_type`` (read on every policy,
  ``None`` on feed-forward ones);
* ``memory_a.rnn`` (a plain ``nn.LSTM`` / ``nn.GRU``) on recurrent policies;
* ``encoders[0]`` and its ``output_size`` on encoder policies, with the encoded component's columns from
  ``st_rl.utils.utils.get_obs_slice``.

The normaliser is applied to raw observations first (``runner.alg.obs_normalizer``; the identity when
``None``). TorchScript files of recurrent policies keep the memory inside the module (buffers ``hidden_state``
and ``cell_state`` of shape ``(num_layers, 1, hidden_size)``: one robot); ONNX files take and return it
(inputs ``obs, h_in[, c_in]``, outputs ``actions, h_out[, c_out]``). Policies with encoders are exported with
their (single) encoder in both formats.

Import it as ``clients.st_gym_exporter`` (``tests/`` is on ``sys.path``, as for ``utils.reference_fixtures``).
"""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any

import torch
import torch.nn as nn

from st_rl.utils.utils import get_obs_slice

__all__ = ["build_exporter", "export_policy_as_jit", "export_policy_as_onnx", "onnx_input_names"]

ONNX_OPSET = 11


class _ExporterBase(nn.Module):
    """The parts every exported policy has: normaliser, optional encoder, actor MLP."""

    def __init__(self, actor_critic: Any, normalizer: nn.Module | None, obs_slices: Any = None) -> None:
        super().__init__()
        self.actor = copy.deepcopy(actor_critic.actor)
        self.is_recurrent = bool(actor_critic.is_recurrent)
        self.rnn_type = actor_critic.rnn_type  # read on feed-forward policies too (None there)
        self.normalizer = copy.deepcopy(normalizer) if normalizer else nn.Identity()
        encoders = getattr(actor_critic, "encoders", None)
        if encoders is not None and len(encoders) > 0:
            if len(encoders) != 1:
                raise NotImplementedError("the st_gym exporter handles one encoded observation component")
            if obs_slices is None:
                names = actor_critic.encoder_component_names
                obs_slices = [get_obs_slice(actor_critic.obs_segments, name) for name in names]
            self.encoder = copy.deepcopy(encoders[0])
            self.encoder_start = int(obs_slices[0][0].start)
            self.encoder_stop = int(obs_slices[0][0].stop)
            self.latent_size = int(self.encoder.output_size)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Raw observations -> the input of the memory (or of the actor MLP when there is none)."""
        x = self.normalizer(x)
        if hasattr(self, "encoder"):  # resolved when scripting
            latent = self.encoder(x[:, self.encoder_start : self.encoder_stop])
            x = torch.cat((x[:, : self.encoder_start], latent, x[:, self.encoder_stop :]), dim=1)
        return x

    def num_obs(self) -> int:
        """Width of the raw observations (for the ONNX example input)."""
        width = self.rnn.input_size if self.is_recurrent else self.actor[0].in_features
        if hasattr(self, "encoder"):
            width += self.encoder_stop - self.encoder_start - self.latent_size
        return int(width)


class FeedForwardExporter(_ExporterBase):
    """``actor(encode(normalizer(obs)))``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.actor(self.embed(x))


class LstmExporter(_ExporterBase):
    """LSTM policy; :meth:`forward` carries the memory of one robot in buffers, :meth:`step` takes it."""

    def __init__(self, actor_critic: Any, normalizer: nn.Module | None, obs_slices: Any = None) -> None:
        super().__init__(actor_critic, normalizer, obs_slices)
        self.rnn = copy.deepcopy(actor_critic.memory_a.rnn)
        state = torch.zeros(self.rnn.num_layers, 1, self.rnn.hidden_size)
        self.register_buffer("hidden_state", state)
        self.register_buffer("cell_state", state.clone())

    def step(
        self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h, c) = self.rnn(self.embed(x).unsqueeze(0), (h, c))
        return self.actor(out.squeeze(0)), h, c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        actions, h, c = self.step(x, self.hidden_state, self.cell_state)
        self.hidden_state.copy_(h.detach())
        self.cell_state.copy_(c.detach())
        return actions

    @torch.jit.export
    def reset_memory(self) -> None:
        self.hidden_state.zero_()
        self.cell_state.zero_()


class GruExporter(_ExporterBase):
    """GRU policy; as :class:`LstmExporter` with a hidden state only."""

    def __init__(self, actor_critic: Any, normalizer: nn.Module | None, obs_slices: Any = None) -> None:
        super().__init__(actor_critic, normalizer, obs_slices)
        self.rnn = copy.deepcopy(actor_critic.memory_a.rnn)
        self.register_buffer("hidden_state", torch.zeros(self.rnn.num_layers, 1, self.rnn.hidden_size))

    def step(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, h = self.rnn(self.embed(x).unsqueeze(0), h)
        return self.actor(out.squeeze(0)), h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        actions, h = self.step(x, self.hidden_state)
        self.hidden_state.copy_(h.detach())
        return actions

    @torch.jit.export
    def reset_memory(self) -> None:
        self.hidden_state.zero_()


class _StatelessLstm(nn.Module):
    """ONNX view of an :class:`LstmExporter`: ``(obs, h_in, c_in) -> (actions, h_out, c_out)``."""

    def __init__(self, exporter: LstmExporter) -> None:
        super().__init__()
        self.exporter = exporter

    def forward(
        self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.exporter.step(x, h, c)


class _StatelessGru(nn.Module):
    """ONNX view of a :class:`GruExporter`: ``(obs, h_in) -> (actions, h_out)``."""

    def __init__(self, exporter: GruExporter) -> None:
        super().__init__()
        self.exporter = exporter

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.exporter.step(x, h)


def build_exporter(
    actor_critic: Any, normalizer: nn.Module | None = None, obs_slices: Any = None
) -> nn.Module:
    """The exporter module of ``actor_critic`` (eager; what the export functions script or trace)."""
    if not actor_critic.is_recurrent:
        return FeedForwardExporter(actor_critic, normalizer, obs_slices)
    if actor_critic.rnn_type == "lstm":
        return LstmExporter(actor_critic, normalizer, obs_slices)
    if actor_critic.rnn_type == "gru":
        return GruExporter(actor_critic, normalizer, obs_slices)
    raise ValueError(f"unknown rnn_type {actor_critic.rnn_type!r}")


def export_policy_as_jit(
    actor_critic: Any, normalizer: nn.Module | None, path: str, filename: str = "policy.pt"
) -> str:
    """Script the exporter of ``actor_critic`` and save it to ``path/filename``; returns the file path."""
    os.makedirs(path, exist_ok=True)
    file = os.path.join(path, filename)
    exporter = build_exporter(actor_critic, normalizer)
    exporter.to("cpu")
    torch.jit.script(exporter).save(file)
    return file


def onnx_input_names(actor_critic: Any) -> tuple[list[str], list[str]]:
    """Input and output names of the ONNX file of ``actor_critic``."""
    if not actor_critic.is_recurrent:
        return ["obs"], ["actions"]
    if actor_critic.rnn_type == "lstm":
        return ["obs", "h_in", "c_in"], ["actions", "h_out", "c_out"]
    return ["obs", "h_in"], ["actions", "h_out"]


def export_policy_as_onnx(
    actor_critic: Any,
    path: str,
    normalizer: nn.Module | None = None,
    filename: str = "policy.onnx",
    obs_slices: Any = None,
) -> str:
    """Export the exporter of ``actor_critic`` to ONNX (opset 11, batch 1) at ``path/filename``.

    ``obs_slices``: ``[get_obs_slice(obs_segments, name)]`` of the encoded component (worked out from the
    policy when ``None``). Returns the file path.
    """
    os.makedirs(path, exist_ok=True)
    file = os.path.join(path, filename)
    exporter = build_exporter(actor_critic, normalizer, obs_slices)
    exporter.to("cpu")
    exporter.eval()
    obs = torch.zeros(1, exporter.num_obs())
    module: nn.Module = exporter
    args: tuple[torch.Tensor, ...] = (obs,)
    if isinstance(exporter, LstmExporter):
        module = _StatelessLstm(exporter)
        args = (obs, exporter.hidden_state.clone(), exporter.cell_state.clone())
    elif isinstance(exporter, GruExporter):
        module = _StatelessGru(exporter)
        args = (obs, exporter.hidden_state.clone())
    input_names, output_names = onnx_input_names(actor_critic)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exporter deprecation notices and the batch-1 RNN hint
        torch.onnx.export(
            module,
            args,
            file,
            opset_version=ONNX_OPSET,
            input_names=input_names,
            output_names=output_names,
            # torch's default exporter, as st_gym calls it: on torch >= 2.9 the dynamo-based one, which needs
            # onnxscript (in st_rl's `export` extra).
        )
    return file
