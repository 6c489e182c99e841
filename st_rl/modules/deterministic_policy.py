"""Reference name (st_rl/compat.py): the deterministic-policy mixin under the reference's module name."""

from st_rl.modules.mixins import DeterministicPolicyMixin

__all__ = ["DeterministicPolicyMixin"]
