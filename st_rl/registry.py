"""Placeholder of the s26-config branch's leaf module (class-name resolution and the trust rules); that branch's
version replaces this file when the branches merge."""

from st_rl.utils.config import refuse_untrusted_import, resolve_class, untrusted_config

__all__ = ["refuse_untrusted_import", "resolve_class", "untrusted_config"]
