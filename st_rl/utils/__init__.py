"""Utilities: observation layout helpers, config resolution, checkpoints, logging.

The reference's ``st_rl.utils`` exports are importable from here: the trajectory padding helpers
(``split_and_pad_trajectories``, ``unpad_trajectories``), the observation layout helpers (``get_obs_slice``,
``get_subobs_size``, ``get_subobs_by_components``, ``substitute_estimated_state``) and ``store_code_state``.
"""

from st_rl.utils.utils import (
    get_obs_slice,
    get_subobs_by_components,
    get_subobs_size,
    split_and_pad_trajectories,
    store_code_state,
    substitute_estimated_state,
    unpad_trajectories,
)

__all__ = [
    "get_obs_slice",
    "get_subobs_by_components",
    "get_subobs_size",
    "split_and_pad_trajectories",
    "store_code_state",
    "substitute_estimated_state",
    "unpad_trajectories",
]
