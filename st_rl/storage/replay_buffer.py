"""A fixed-size ring buffer of ``(state, next_state)`` pairs on the training device."""

from __future__ import annotations

from collections.abc import Iterator

import torch


class ReplayBuffer:
    """Ring buffer of ``buffer_size`` ``states`` / ``next_states`` (e.g. past policy AMP windows)."""

    def __init__(self, obs_dim: int, buffer_size: int, device: str | torch.device = "cpu") -> None:
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
        self.device = torch.device(device)
        self.obs_dim = int(obs_dim)
        self.buffer_size = int(buffer_size)
        self.states, self.next_states = torch.zeros(2, self.buffer_size, self.obs_dim, device=self.device)
        self.step = 0
        self.num_samples = 0

    def insert(self, states: torch.Tensor, next_states: torch.Tensor | None = None) -> None:
        """Append a batch (N, obs_dim), wrapping around the end; ``next_states`` defaults to ``states``."""
        states = states.reshape(-1, self.obs_dim).to(self.device)
        next_states = states if next_states is None else next_states.reshape(-1, self.obs_dim).to(self.device)
        n = states.shape[0]
        if n > self.buffer_size:  # only the newest buffer_size entries survive anyway
            states, next_states = states[-self.buffer_size :], next_states[-self.buffer_size :]
            n = self.buffer_size
        idx = (torch.arange(n, device=self.device) + self.step) % self.buffer_size
        self.states[idx] = states
        self.next_states[idx] = next_states
        self.step = (self.step + n) % self.buffer_size
        self.num_samples = min(self.buffer_size, self.num_samples + n)

    def sample(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` pairs drawn uniformly with replacement from the filled part."""
        if self.num_samples == 0:
            raise ValueError("ReplayBuffer is empty: insert() before sampling")
        idx = torch.randint(0, self.num_samples, (batch_size,), device=self.device)
        return self.states[idx], self.next_states[idx]

    def feed_forward_generator(
        self, num_mini_batch: int, mini_batch_size: int
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for _ in range(num_mini_batch):
            yield self.sample(mini_batch_size)
