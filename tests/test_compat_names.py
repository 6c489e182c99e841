"""Every reference-compatibility name listed in st_rl/compat.py resolves to what it claims."""

from __future__ import annotations

import inspect

import pytest

from st_rl.compat import KEYWORD_ALIASES, REFERENCE_NAMES, resolve_reference_name


@pytest.mark.parametrize("reference", sorted(REFERENCE_NAMES))
def test_reference_name_is_the_current_object(reference):
    assert resolve_reference_name(reference) is resolve_reference_name(REFERENCE_NAMES[reference])


@pytest.mark.parametrize("owner", sorted(KEYWORD_ALIASES))
def test_keyword_aliases_are_accepted(owner):
    old, new = KEYWORD_ALIASES[owner]
    target = resolve_reference_name(owner)
    params = inspect.signature(target).parameters
    doc = inspect.getdoc(target) or ""
    if new in params:
        # a keyword argument; the alias is a keyword too, or documented and taken through **kwargs
        assert old in params or (old in doc and any(p.kind is p.VAR_KEYWORD for p in params.values()))
    else:  # a key of a config dict the function reads: both documented
        assert old in doc and new in doc


def test_misspelt_paths_import():
    from st_rl.runners import OnPolicyRunner
    from st_rl.storage.replay_buffer import ReplayBuffer as Current
    from st_rl.storage.reply_buffer import ReplayBuffer

    assert ReplayBuffer is Current
    assert OnPolicyRunner.init_writter is OnPolicyRunner.init_writer
