"""Utilities: observation layout, checkpoints, logging; the reference's ``st_rl.utils`` exports."""

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
