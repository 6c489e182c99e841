"""Saving, checking and restoring an :class:`~st_rl.runners.OnPolicyRunner`'s checkpoints."""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from typing import Any

import torch

import st_rl
from st_rl.modules.actor_critic import DEFAULT_NONLINEARITY_KEY, ActorCritic
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.utils import checkpoint as ckpt
from st_rl.utils.ckpt_manipulator import apply_manipulator
from st_rl.utils.distributed import gather_objects

_OPTIMIZER_KEYS = ("optimizer_state_dict", "lr_scheduler_state_dict")


class Checkpointer:
    """Writes an :class:`~st_rl.runners.OnPolicyRunner`'s checkpoints atomically and loads them all or nothing."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.last_good: str | None = None  # the newest checkpoint written or loaded
        self.last_saved_iteration = -1
        self.env_state_restored = False  # load() restored the episodes: learn() keeps their lengths

    @property
    def _alg(self) -> Any:
        return self.runner.alg

    def save(self, path: str, infos: dict[str, Any] | None = None) -> None:
        """See :meth:`OnPolicyRunner.save`."""
        r = self.runner
        alg_state = self._alg.state_dict()
        rollout_state = self.rollout_state()
        bad = _nonfinite_entries(alg_state, rollout_state)
        per_rank: list[Any] | None = None
        if r.dist.enabled:
            # Collective: rank 0 writes each rank's RNG, environment and memory state.
            per_rank = gather_objects((ckpt.capture_rng_state(), self.env_state(), rollout_state, bad))
            bad = list(dict.fromkeys(name for g in per_rank for name in g[3]))  # every rank refuses together
        if bad:
            kept = (
                f"The last good checkpoint is {self.last_good}."
                if self.last_good
                else "This runner has not written or loaded a good checkpoint yet."
            )
            existing = " The file already there is left unchanged." if os.path.exists(path) else ""
            raise ckpt.NonFiniteCheckpointError(
                f"Refusing to save {path} at iteration {r.current_learning_iteration}: NaN/Inf in "
                f"{ckpt.describe_names(bad)}. Nothing was written.{existing} {kept} Training diverged: lower the "
                "learning rate, normalise or clip observations and rewards, and resume from the last good checkpoint."
            )
        self.last_saved_iteration = r.current_learning_iteration
        if not r.is_main_process:
            self.last_good = os.path.abspath(path)  # rank 0 writes it
            return
        directory = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        if r.log_dir is not None and directory == os.path.realpath(r.log_dir):
            r._claim_run_dir()  # the first write into log_dir locks it (and writes config.json)
        state = alg_state
        state.update(
            iter=r.current_learning_iteration,
            infos=infos,
            rng_state=ckpt.capture_rng_state(),
            config=r.train_cfg.to_dict(),
            format_version=ckpt.CHECKPOINT_FORMAT_VERSION,
            st_rl_version=st_rl.__version__,
        )
        env_state = self.env_state()
        if env_state is not None:
            state["env_state"] = env_state
        if rollout_state:
            state["policy_rollout_state"] = rollout_state
        if per_rank is not None:
            state["rng_state_per_rank"] = [g[0] for g in per_rank]
            state["env_state_per_rank"] = [g[1] for g in per_rank]
            if any(g[2] for g in per_rank):
                state["policy_rollout_state_per_rank"] = [g[2] for g in per_rank]
        ckpt.save_checkpoint(path, state)
        self.last_good = os.path.abspath(path)
        r.writer.save_model(path, r.current_learning_iteration)  # W&B / Neptune / custom writers upload

    def rollout_state(self) -> dict[str, Any]:
        """The policy's rollout hidden state (recurrent policies; ``{}`` otherwise)."""
        policy = self._alg.actor_critic
        return policy.rollout_state_dict() if isinstance(policy, ActorCritic) else {}

    def env_state(self) -> Any:
        """The env's ``state_dict()``, else its ``episode_length_buf``; None when it has neither."""
        try:
            value = self.runner.env_adapter.state_dict()
            if value is None:
                lengths = getattr(self.runner.env, "episode_length_buf", None)
                if not isinstance(lengths, torch.Tensor):
                    return None
                value = {"episode_length_buf": lengths.detach().clone()}
            ckpt.check_weights_only_safe(value, "env_state")
            return value
        except TypeError as e:
            warnings.warn(f"Environment state not saved: {e}", stacklevel=3)
            return None

    def _load_env_state(self, env_state: Any) -> None:
        adapter = self.runner.env_adapter
        if adapter.load_state_dict(env_state):
            return
        lengths = env_state.get("episode_length_buf") if isinstance(env_state, dict) else None
        current = getattr(self.runner.env, "episode_length_buf", None)
        if not isinstance(lengths, torch.Tensor) or not isinstance(current, torch.Tensor):
            raise KeyError("the environment has no load_state_dict() and the state no episode_length_buf")
        if lengths.shape != current.shape:
            raise ValueError(
                f"episode_length_buf has shape {tuple(lengths.shape)}, the environment {tuple(current.shape)}"
            )
        adapter.episode_length_buf = lengths.to(current.device, current.dtype).clone()

    def load(self, path: str, load_optimizer: bool = True, map_location: Any = None) -> tuple[Any, int]:
        """See :meth:`OnPolicyRunner.load`; returns the checkpoint's ``infos`` and iteration."""
        r = self.runner
        state = ckpt.load_checkpoint(path, map_location=map_location)
        manipulator = r.cfg.get("ckpt_manipulator")
        if manipulator:
            state = apply_manipulator(manipulator, state, self._alg.state_dict(), path)
            if r.log_dir is not None:
                # Named so that no "latest model" lookup takes it for this run's newest checkpoint.
                name = os.path.splitext(os.path.basename(path))[0].replace("model_", "")
                ckpt.save_checkpoint(os.path.join(r.log_dir, f"loaded_{name}_manipulated.pt"), state)
        plan = self._check(path, state, load_optimizer)
        # What this load may change, put back if it fails (an env that cannot report its state cannot be).
        env = None
        if load_optimizer:
            with contextlib.suppress(Exception):
                env = r.env_adapter.state_dict()
        snapshot = {
            "alg": copy.deepcopy(self._alg.state_dict()),
            "learning_rate": self._alg.learning_rate,
            "rng": ckpt.capture_rng_state() if load_optimizer else None,
            "env": env,
            "rollout": copy.deepcopy(self.rollout_state()),
        }
        restored_env, not_restored = False, ""
        try:
            with warnings.catch_warnings():  # reported below, with the file name
                warnings.filterwarnings("ignore", message="The checkpoint has no observation statistics")
                if plan.get("drop_optimizer"):
                    state = {k: v for k, v in state.items() if k not in _OPTIMIZER_KEYS}
                self._alg.load_state_dict(state, load_optimizer=load_optimizer)
            if load_optimizer:
                if plan["rng_state"] is not None:
                    ckpt.restore_rng_state(plan["rng_state"])
                restored_env, not_restored = self._restore_env_and_memory(path, plan, snapshot["env"])
        except BaseException as e:
            self._restore_snapshot(snapshot)
            if isinstance(e, ckpt.CheckpointError) or not isinstance(e, Exception):
                raise
            raise ckpt.CheckpointError(
                f"Checkpoint {path} could not be loaded ({type(e).__name__}: {ckpt.first_line(e)}); the runner "
                "was left as it was. Check that the config matches the run that saved it."
            ) from e
        for message in plan["warnings"] + ([not_restored] if not_restored else []):
            warnings.warn(message, stacklevel=3)
        self.env_state_restored = restored_env
        self.last_good = os.path.abspath(path)
        return state.get("infos"), plan["iter"]

    def _check(self, path: str, state: dict[str, Any], load_optimizer: bool) -> dict[str, Any]:
        """Check everything :meth:`load` will restore, before anything changes; returns the load plan."""
        it = state.get("iter", 0)
        if isinstance(it, bool) or not isinstance(it, int) or it < 0:
            raise ckpt.CheckpointError(f"Checkpoint {path}: 'iter' is {it!r}; expected an integer >= 0.")
        alg_keys = set(self._alg.state_dict())
        if not load_optimizer:
            alg_keys -= set(_OPTIMIZER_KEYS)
        model = state.get("model_state_dict")
        if not isinstance(model, dict) or not all(isinstance(v, torch.Tensor) for v in model.values()):
            raise ckpt.CheckpointError(f"Checkpoint {path}: 'model_state_dict' is not a dict of tensors.")
        notes = check_model_state(path, self._alg.actor_critic, model)
        plan: dict[str, Any] = {"iter": it, "rng_state": None, "env_state": None, "rollout_state": None}
        if load_optimizer:
            optimizer_state = state.get("optimizer_state_dict")
            if optimizer_state is None:
                notes.append(
                    f"{path} has no optimizer state (optimizer_state_dict): the optimizer starts fresh "
                    f"(learning rate {self._alg.learning_rate:g})."
                )
            elif self._other_optimizer(path, optimizer_state, notes):  # its state is dropped: starts fresh
                plan["drop_optimizer"] = True
            else:
                check_optimizer_state(path, self._alg.optimizer, optimizer_state)
            self._check_rank_states(path, state, plan, notes)
        bad = _nonfinite_entries({key: state.get(key) for key in sorted(alg_keys)}, plan["rollout_state"])
        if bad:
            raise ckpt.NonFiniteCheckpointError(
                f"Checkpoint {path}: NaN/Inf in {ckpt.describe_names(bad)}: the run had diverged when it was "
                "saved. Use an earlier checkpoint of the run."
            )
        plan["warnings"] = notes
        return plan

    def _check_rank_states(
        self, path: str, state: dict[str, Any], plan: dict[str, Any], notes: list[str]
    ) -> None:
        """Pick this rank's RNG, env and memory states into ``plan``; check the RNG state."""
        info = self.runner.dist
        rng_state, env_state = state.get("rng_state"), state.get("env_state")
        rollout_state = state.get("policy_rollout_state")
        per_rank = state.get("rng_state_per_rank")
        if info.enabled:
            if isinstance(per_rank, list) and len(per_rank) == info.world_size:
                none = [None] * len(per_rank)
                rng_state = per_rank[info.rank]
                env_state = (state.get("env_state_per_rank") or none)[info.rank]
                rollout_state = (state.get("policy_rollout_state_per_rank") or none)[info.rank]
            else:
                notes.append(
                    f"{path} was saved by a run with another number of ranks; every rank reseeds from the "
                    "config seed + rank instead of restoring its RNG, environment and memory state."
                )
                rng_state = env_state = rollout_state = None
                plan["reseed"] = True
        where = f"rng_state_per_rank[{info.rank}]" if info.enabled else "rng_state"
        if rng_state is not None:
            try:
                ckpt.check_rng_state(rng_state, where)
            except ValueError as e:
                raise ckpt.CheckpointError(
                    f"Checkpoint {path}: {e}; its RNG state cannot be restored."
                ) from e
        plan.update(rng_state=rng_state, env_state=env_state, rollout_state=rollout_state)
        absent = [  # warned once, with the states that do not fit
            (rng_state, "the random number generators (the file has no rng_state): the random draws differ"),
            (env_state, "the environment's episodes (the file has no env_state): they continue as they are"),
        ]
        plan["absent"] = [] if plan.get("reseed") else [what for value, what in absent if value is None]

    def _other_optimizer(self, path: str, saved: Any, notes: list[str]) -> bool:
        """Whether ``saved`` comes from another optimizer class (its groups lack this one's hyperparameters)."""
        optimizer = self._alg.optimizer
        groups = saved.get("param_groups") if isinstance(saved, dict) else None
        if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
            return False  # check_optimizer_state names the problem
        probe = copy.deepcopy(optimizer)
        try:
            probe.load_state_dict(saved)  # fills the defaults an older torch did not save
        except Exception:  # noqa: BLE001 - a malformed state: check_optimizer_state names the problem
            return False
        missing = sorted(
            {key for group in probe.param_groups for key in optimizer.defaults if key not in group}
        )
        if missing:
            notes.append(
                f"Checkpoint {path}: optimizer_state_dict was saved by another optimizer than this run's "
                f"{type(optimizer).__name__} (it has no {', '.join(missing)}): the optimizer starts fresh "
                f"(learning rate {self._alg.learning_rate:g}); the policy, its normalisers and the rest are restored."
            )
        return bool(missing)

    def _restore_snapshot(self, snapshot: dict[str, Any]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._alg.load_state_dict(snapshot["alg"], load_optimizer=True)
            if snapshot["env"] is not None:
                self.runner.env_adapter.load_state_dict(snapshot["env"])
        self._alg.learning_rate = snapshot["learning_rate"]
        if snapshot["rng"] is not None:
            ckpt.restore_rng_state(snapshot["rng"])
        policy = self._alg.actor_critic
        if isinstance(policy, ActorCritic) and snapshot["rollout"]:
            policy.load_rollout_state_dict(snapshot["rollout"])

    def _restore_env_and_memory(self, path: str, plan: dict[str, Any], env_before: Any) -> tuple[bool, str]:
        """Restore the env and rollout states; returns whether the env was restored and a warning (or "")."""
        r = self.runner
        if plan.get("reseed") and r.cfg.get("seed") is not None:
            ckpt.seed_everything(int(r.cfg["seed"]) + r.dist.rank + int(plan["iter"]))
        restored, absent = False, list(plan.get("absent", ()))
        skipped = list(absent)
        if plan["env_state"] is not None:
            try:
                self._load_env_state(plan["env_state"])
                restored = True
            except (RuntimeError, KeyError, ValueError, TypeError) as e:
                if env_before is not None:
                    r.env_adapter.load_state_dict(env_before)  # no half-restored environment
                skipped.append(
                    f"the environment's episodes ({ckpt.first_line(e)}): they continue as they are"
                )
        policy = self._alg.actor_critic
        if plan["rollout_state"] is not None and isinstance(policy, ActorCritic):
            try:
                policy.load_rollout_state_dict(plan["rollout_state"], r.env_adapter.num_envs)
            except ValueError as e:
                policy.reset()
                skipped.append(f"the policy's rollout memories ({e}): they start from zero")
        if not skipped:
            return restored, ""
        note = f"Checkpoint {path}: not restored, so training does not continue exactly where it stopped: "
        note += "; ".join(skipped) + "."
        if len(skipped) > len(absent):  # a state that does not fit
            note += " (Expected when the number of environments differs from the saved run's.)"
        return restored, note


def _nonfinite_entries(alg_state: dict[str, Any], rollout_state: Any) -> list[str]:
    bad = [name for key, value in alg_state.items() for name in ckpt.nonfinite_tensors(value, key)]
    return bad + ckpt.nonfinite_tensors(rollout_state, "policy_rollout_state")


def check_model_state(path: str, policy: torch.nn.Module, model: dict[str, torch.Tensor]) -> list[str]:
    """Check ``model_state_dict`` against the policy's keys and shapes (CheckpointError); returns warnings."""
    own = policy.state_dict()
    notes: list[str] = []
    tolerated: set[str] = set()
    ignored: set[str] = set()
    if isinstance(policy, ActorCritic):  # its load_state_dict tolerates missing / unused statistics
        tolerated.add(DEFAULT_NONLINEARITY_KEY)  # absent before the ReLU default: restored by load_state_dict
        ignored |= {k for k in model if k.startswith("discriminator.")}  # old layout: the AMP extension's
        for prefix in ("actor_obs_normalizer.", "critic_obs_normalizer."):
            own_keys = {k for k in own if k.startswith(prefix)}
            saved_keys = {k for k in model if k.startswith(prefix)}
            if own_keys and not saved_keys:
                tolerated |= own_keys
                notes.append(
                    f"{path} has no observation normaliser statistics for {prefix[:-1]} "
                    f"(model_state_dict['{prefix}*']): the normaliser keeps its current statistics (fresh "
                    "ones in a new runner) and learns them again during training."
                )
            elif saved_keys and not own_keys:
                ignored |= saved_keys
    for name, module in policy.named_modules():
        if isinstance(module, EmpiricalNormalization):  # old checkpoints lack the count
            tolerated.add(f"{name}.count" if name else "count")
    missing = [k for k in own if k not in model and k not in tolerated]
    unexpected = [k for k in model if k not in own and k not in ignored]
    wrong = [
        f"'{k}' is {tuple(model[k].shape)} in the file, {tuple(v.shape)} in this policy"
        for k, v in own.items()
        if k in model and tuple(model[k].shape) != tuple(v.shape)
    ]
    problems = [f"it lacks {ckpt.describe_names(missing)}"] if missing else []
    problems += [f"it has unexpected {ckpt.describe_names(unexpected)}"] if unexpected else []
    problems += [f"shapes differ: {ckpt.describe_names(wrong, 3)}"] if wrong else []
    if problems:
        raise ckpt.CheckpointError(
            f"Checkpoint {path} does not fit this policy (model_state_dict): {'; '.join(problems)}. Check "
            "that the policy config (class_name, hidden dims, observation sizes) matches the run that saved it."
        )
    return notes


def check_optimizer_state(path: str, optimizer: torch.optim.Optimizer, saved: Any) -> None:
    """Check that ``saved`` fits ``optimizer`` (groups, parameters, state shapes), else CheckpointError."""
    prefix = f"Checkpoint {path}: optimizer_state_dict"
    if (
        not isinstance(saved, dict)
        or not isinstance(saved.get("param_groups"), list)
        or not isinstance(saved.get("state"), dict)
        or not all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in saved["param_groups"])
    ):
        raise ckpt.CheckpointError(f"{prefix} is not an optimizer state ('state' and 'param_groups').")
    groups = saved["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        raise ckpt.CheckpointError(
            f"{prefix} has {len(groups)} parameter group(s), this runner's optimizer "
            f"{len(optimizer.param_groups)}: the algorithm config (extensions, optimizer) differs from the "
            "run that saved it. Resume with the same config, or load with load_optimizer=False."
        )
    params: dict[Any, torch.Tensor] = {}
    for i, (group, own) in enumerate(zip(groups, optimizer.param_groups)):
        if len(group["params"]) != len(own["params"]):
            raise ckpt.CheckpointError(
                f"{prefix}['param_groups'][{i}] has {len(group['params'])} parameters, this runner's "
                f"optimizer group {len(own['params'])}: the config differs from the run that saved it."
            )
        params.update(zip(group["params"], own["params"]))
    for index, entry in saved["state"].items():
        if index not in params:
            raise ckpt.CheckpointError(f"{prefix}['state'][{index!r}] belongs to no parameter group.")
        if not isinstance(entry, dict):
            raise ckpt.CheckpointError(f"{prefix}['state'][{index!r}] is not a dict.")
        shape = tuple(params[index].shape)
        for key, value in entry.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and tuple(value.shape) != shape:
                raise ckpt.CheckpointError(
                    f"{prefix}['state'][{index!r}][{key!r}] has shape {tuple(value.shape)}, its parameter {shape}."
                )
