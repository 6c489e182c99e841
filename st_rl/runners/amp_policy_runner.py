"""The on-policy runner for AMP algorithms."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from st_rl.runners.on_policy_runner import OnPolicyRunner


class AmpPolicyRunner(OnPolicyRunner):
    """:class:`OnPolicyRunner` for APPO / ATPPO: the same loop, checked at construction for what AMP needs.

    The environment must put the policy's style window in ``extras["observations"]["ref_obs"]`` and a
    reference window in ``extras["ref_motion"]`` (legged_gym and rsl_rl 2.x / st_gym APIs alike); the
    discriminator's ``input_dim`` is filled from ``ref_obs`` when the config leaves it ``None``. The optional
    Optuna ``trial`` of :meth:`learn` receives the velocity-tracking RMSD every iteration.
    """

    def __init__(
        self, env: Any, train_cfg: Any, log_dir: str | None = None, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        if "amp" not in self.alg.extensions:
            raise ValueError(
                f"AmpPolicyRunner trains AMP algorithms (APPO, ATPPO); got {type(self.alg).__name__}. Use "
                "OnPolicyRunner for the others."
            )
        if self.env_adapter.amp_obs_dim is None:
            warnings.warn(
                "The environment declares no amp_obs_dim and its observations carry no 'ref_obs' group; APPO "
                "will raise at the first step unless step() provides extras['observations']['ref_obs'] and "
                "extras['ref_motion'] (see st_rl.datasets.AmpObservationWrapper).",
                stacklevel=2,
            )
