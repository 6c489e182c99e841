"""Environment contract, adapter for every supported API, and observation layout helpers."""

from st_rl.env.adapter import (
    API_NAMES,
    EnvAdapter,
    EnvOutputError,
    EnvSpec,
    NonFiniteError,
    ObservationGroups,
    describe_value,
    detect_api,
)
from st_rl.env.layout import (
    get_obs_slice,
    get_subobs_by_components,
    get_subobs_size,
    normalize_segments,
    segments_size,
    substitute_estimated_state,
)
from st_rl.env.vec_env import VecEnv, VecEnvLike

__all__ = [
    "API_NAMES",
    "EnvAdapter",
    "EnvOutputError",
    "EnvSpec",
    "NonFiniteError",
    "ObservationGroups",
    "VecEnv",
    "VecEnvLike",
    "describe_value",
    "detect_api",
    "get_obs_slice",
    "get_subobs_by_components",
    "get_subobs_size",
    "normalize_segments",
    "segments_size",
    "substitute_estimated_state",
]
