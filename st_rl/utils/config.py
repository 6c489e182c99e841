"""Config resolution at its former path (the docs and user scripts import it from here): the names of
:mod:`st_rl.config.resolve` and :mod:`st_rl.registry`. Nothing inside st_rl imports this module."""

from st_rl.config.resolve import (
    ConvertibleConfig,
    TrainConfig,
    env_cfg_to_jsonable,
    resolve_train_cfg,
    to_jsonable,
    to_plain_dict,
)
from st_rl.registry import (
    TRUST_OPT_IN,
    UntrustedConfigError,
    available_classes,
    class_label,
    imports_allowed,
    refuse_untrusted_import,
    resolve_class,
    untrusted_config,
)

__all__ = [
    "TRUST_OPT_IN",
    "ConvertibleConfig",
    "TrainConfig",
    "UntrustedConfigError",
    "available_classes",
    "class_label",
    "env_cfg_to_jsonable",
    "imports_allowed",
    "refuse_untrusted_import",
    "resolve_class",
    "resolve_train_cfg",
    "to_jsonable",
    "to_plain_dict",
    "untrusted_config",
]
