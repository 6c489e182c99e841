"""The on-policy runner for AMP algorithms."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from st_rl.runners.on_policy_runner import OnPolicyRunner


class AmpPolicyRunner(OnPolicyRunner):
    """:class:`OnPolicyRunner` for APPO / ATPPO: the environment puts the policy's style window in
    ``extras["observations"]["ref_obs"]`` and a reference window in ``extras["ref_motion"]``."""

    def __init__(
        self, env: Any, train_cfg: Any, log_dir: str | None = None, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        if "amp" not in self.alg.extensions:
            name = type(self.alg).__name__
            raise ValueError(
                f"AmpPolicyRunner trains AMP algorithms (APPO, ATPPO); got {name}: use OnPolicyRunner"
            )
        if self.env_adapter.amp_obs_dim is None:
            msg = "The env has no 'ref_obs' observations: APPO needs them (st_rl.datasets.AmpObservationWrapper)."
            warnings.warn(msg, stacklevel=2)
