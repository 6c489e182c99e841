"""Training configuration: one typed schema for runner, policy, algorithm and extensions, validated once at
the edge (:func:`resolve_train_cfg`), config files and command-line overrides."""

from __future__ import annotations

from st_rl.config.errors import MISSING, ConfigError, Problem
from st_rl.config.files import load_config_file
from st_rl.config.overrides import apply_overrides, parse_value

__all__ = ["MISSING", "ConfigError", "Problem", "apply_overrides", "load_config_file", "parse_value"]
