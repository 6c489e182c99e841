"""Reference name (st_rl/compat.py): ``st_rl.envs[.<module>]`` is the same module object as ``st_rl.tasks[...]``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType
from typing import Any

from st_rl.tasks import *  # noqa: F403
from st_rl.tasks import __all__  # noqa: F401

_OLD, _NEW = "st_rl.envs.", "st_rl.tasks."


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``st_rl.envs.<name>`` as the module object ``st_rl.tasks.<name>``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(_OLD) or importlib.util.find_spec(_NEW + fullname[len(_OLD) :]) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        return importlib.import_module(_NEW + spec.name[len(_OLD) :])

    def exec_module(self, module: ModuleType) -> None:
        pass  # the target module is already executed


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
