"""Reference name (st_rl/compat.py): ``st_rl.envs[.<module>]`` is the same module object as ``st_rl.tasks[...]``."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import st_rl.tasks
from st_rl.tasks import *  # noqa: F403
from st_rl.tasks import __all__  # noqa: F401

for _info in pkgutil.iter_modules(st_rl.tasks.__path__):
    _module = importlib.import_module(f"st_rl.tasks.{_info.name}")
    sys.modules[f"{__name__}.{_info.name}"] = globals()[_info.name] = _module
