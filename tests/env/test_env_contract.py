"""The environment-output contract of EnvAdapter, on every API: conversions, and errors that name the method,
the output, what was returned and the fix (nothing is reshaped across environments)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch

from st_rl.env import EnvAdapter, EnvOutputError

N, W, C = 16, 4, 6  # environments, actor width, critic width
APIS = ("legged_gym", "rsl_rl2", "tensordict")


class ContractEnv:
    """A do-nothing environment of one API whose outputs can be replaced (``override``) to break the contract.

    Outputs: ``obs`` (N, W), ``critic`` (N, C), ``rewards`` (N,), ``dones`` (N,) bool, ``time_outs`` (N,) bool.
    """

    def __init__(self, api: str, **override: Any) -> None:
        self.api = api
        self.num_envs, self.num_obs, self.num_actions = N, W, 2
        self.num_privileged_obs = C
        self.device = torch.device("cpu")
        self.max_episode_length = 10
        self.episode_length_buf = torch.zeros(N, dtype=torch.long)
        self.override: dict[str, Any] = dict(override)

    def _out(self, name: str) -> Any:
        defaults = {
            "obs": torch.arange(N * W, dtype=torch.float32).reshape(N, W),
            "critic": torch.ones(N, C),
            "rewards": torch.full((N,), 0.5),
            "dones": torch.zeros(N, dtype=torch.bool),
            "time_outs": torch.zeros(N, dtype=torch.bool),
        }
        return self.override.get(name, defaults[name])

    def _groups(self) -> dict[str, Any]:
        return {"policy": self._out("obs"), "critic": self._out("critic")}

    def get_observations(self) -> Any:
        if self.api == "legged_gym":
            return self._out("obs")
        if self.api == "rsl_rl2":
            return self._out("obs"), {"observations": self._groups()}
        return self._groups()

    def get_privileged_observations(self) -> Any:
        return self._out("critic")

    def reset(self) -> Any:
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> Any:
        rewards, dones = self._out("rewards"), self._out("dones")
        if self.api == "legged_gym":
            infos = {"time_outs": self._out("time_outs")}
            return self._out("obs"), self._out("critic"), rewards, dones, infos
        extras: dict[str, Any] = {"time_outs": self._out("time_outs")}
        if self.api == "rsl_rl2":
            extras["observations"] = self._groups()
            return self._out("obs"), rewards, dones, extras
        return self._groups(), rewards, dones, extras


def actor_output(api: str) -> str:
    """How error messages name the actor observation of each API."""
    return "obs['policy']" if api == "tensordict" else "obs"


def critic_output(api: str) -> str:
    return {
        "legged_gym": "privileged_obs",
        "rsl_rl2": "extras['observations']['critic']",
        "tensordict": "obs['critic']",
    }[api]


def expect_error(fn: Any, *fragments: str) -> str:
    """Run ``fn``; it must raise EnvOutputError whose message holds every fragment and a fix."""
    with pytest.raises(EnvOutputError) as info:
        fn()
    message = str(info.value)
    for fragment in (*fragments, "Fix:"):
        assert fragment in message, f"{fragment!r} not in: {message}"
    return message


def step(adapter: EnvAdapter) -> Any:
    return adapter.step(torch.zeros(N, 2))


# ---------------------------------------------------------------------------------------------- conversions
@pytest.mark.parametrize("api", APIS)
def test_numpy_outputs_are_converted_to_float32_tensors_on_the_training_device(api):
    obs = np.arange(N * W, dtype=np.float64).reshape(N, W)
    env = ContractEnv(
        api,
        obs=obs,
        critic=np.ones((N, C), dtype=np.float32),
        rewards=np.full(N, 0.25),
        dones=(np.arange(N) % 2).astype(np.int64),  # 0/1 integers
        time_outs=np.zeros(N, dtype=bool),
    )
    adapter = EnvAdapter(env)
    assert (adapter.num_obs, adapter.num_critic_obs) == (W, C)
    o, c, _ = adapter.get_observations()
    assert o.dtype == c.dtype == torch.float32 and o.shape == (N, W) and c.shape == (N, C)
    o, c, r, d, infos = step(adapter)
    assert o.dtype == torch.float32 and torch.equal(o, torch.as_tensor(obs, dtype=torch.float32))
    assert r.dtype == torch.float32 and r.shape == (N,) and bool((r == 0.25).all())
    assert d.dtype == torch.bool and d.tolist() == [bool(i % 2) for i in range(N)]
    assert infos["time_outs"].dtype == torch.bool and infos["time_outs"].shape == (N,)
    obs[:] = -1.0  # the environment reuses its array: what the adapter returned is a copy
    assert float(o.min()) == 0.0


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "dones", [torch.ones(N, dtype=torch.long), torch.ones(N, dtype=torch.int32), torch.ones(N)]
)
def test_integer_and_float_zero_one_dones_become_bool(api, dones):
    adapter = EnvAdapter(ContractEnv(api, dones=dones, time_outs=dones.clone()))
    _, _, _, d, infos = step(adapter)
    assert d.dtype == torch.bool and bool(d.all())
    assert infos["time_outs"].dtype == torch.bool and bool(infos["time_outs"].all())


@pytest.mark.parametrize("api", APIS)
def test_float64_and_float16_observations_become_float32(api):
    adapter = EnvAdapter(ContractEnv(api, obs=torch.zeros(N, W, dtype=torch.float64)))
    assert adapter.get_observations()[0].dtype == torch.float32
    adapter.env.override["obs"] = torch.zeros(N, W, dtype=torch.float16)
    assert step(adapter)[0].dtype == torch.float32


def test_group_with_several_per_environment_dimensions_is_flattened():
    env = ContractEnv("tensordict", critic=torch.ones(N, 2, 3))  # e.g. a height map (N, rows, cols)
    adapter = EnvAdapter(env)
    assert adapter.num_critic_obs == 6 and adapter.critic_obs_segments["critic"] == (2, 3)
    assert step(adapter)[1].shape == (N, 6)


# ---------------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("api", APIS)
def test_transposed_observation_is_rejected_naming_method_and_output(api):
    transposed = torch.zeros(N, W).T  # (4, 16) for 16 envs: the old adapter reshaped it silently
    expect_error(
        lambda: EnvAdapter(ContractEnv(api, obs=transposed)),
        "ContractEnv.get_observations()",
        actor_output(api),
        "(4, 16)",
        "transposed",
        ".T",
    )
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["obs"] = transposed
    expect_error(lambda: step(adapter), "ContractEnv.step()", actor_output(api), "(4, 16)", "transposed")


@pytest.mark.parametrize("api", APIS)
def test_short_observation_is_rejected(api):
    short = torch.zeros(N // 2, 2 * W)  # 8 rows for 16 envs, the same number of elements
    expect_error(
        lambda: EnvAdapter(ContractEnv(api, obs=short)),
        "get_observations()",
        actor_output(api),
        "(8, 8)",
        "8 rows",
        "num_envs=16",
    )
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["obs"] = short
    expect_error(lambda: step(adapter), "step()", actor_output(api), "(8, 8)", "8 rows")


@pytest.mark.parametrize("api", APIS)
def test_bad_critic_observation_is_rejected_naming_its_output(api):
    adapter = EnvAdapter(ContractEnv(api))
    assert adapter.has_critic_group
    adapter.env.override["critic"] = torch.zeros(C, N)
    method = "get_privileged_observations()" if api == "legged_gym" else "get_observations()"
    expect_error(adapter.get_observations, method, critic_output(api), f"({C}, {N})", "transposed")
    expect_error(lambda: step(adapter), "step()", critic_output(api), f"({C}, {N})")


@pytest.mark.parametrize("api", ("legged_gym", "rsl_rl2"))
def test_flat_observation_must_be_two_dimensional(api):
    expect_error(
        lambda: EnvAdapter(ContractEnv(api, obs=torch.zeros(N, 2, 2))),
        "get_observations()",
        "obs",
        "(16, 2, 2)",
        "2-D",
        "reshape(16, -1)",
    )
    expect_error(lambda: EnvAdapter(ContractEnv(api, obs=torch.zeros(N))), "obs", "(16,)", "2-D")


@pytest.mark.parametrize("api", APIS)
def test_observation_width_may_not_change(api):
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["obs"] = torch.zeros(N, W + 1)
    expect_error(lambda: step(adapter), "step()", "(16, 5)", "(num_envs, 4)")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", [(N, 1), (N // 2,), (1, N), ()])
def test_wrong_reward_shape_is_rejected(api, shape):
    adapter = EnvAdapter(ContractEnv(api, rewards=torch.zeros(shape)))
    message = expect_error(lambda: step(adapter), "ContractEnv.step()", "rewards", str(shape), "(16,)")
    if int(np.prod(shape)) == N:
        assert "rewards.reshape(16)" in message
    else:
        assert "one value per environment" in message


@pytest.mark.parametrize("api", APIS)
def test_wrong_dones_and_time_outs_shapes_are_rejected(api):
    adapter = EnvAdapter(ContractEnv(api, dones=torch.zeros(N, 1, dtype=torch.bool)))
    expect_error(lambda: step(adapter), "step()", "dones", "(16, 1)")
    infos = "infos" if api == "legged_gym" else "extras"
    adapter = EnvAdapter(ContractEnv(api, time_outs=torch.zeros(N // 2, dtype=torch.bool)))
    expect_error(lambda: step(adapter), "step()", f"{infos}['time_outs']", "(8,)")


# ---------------------------------------------------------------------------------------------- dtypes, types
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.bool, torch.uint8])
def test_integer_observations_are_rejected(api, dtype):
    expect_error(
        lambda: EnvAdapter(ContractEnv(api, obs=torch.zeros(N, W, dtype=dtype))),
        "get_observations()",
        actor_output(api),
        str(dtype),
        "floating point",
        ".float()",
    )
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["obs"] = np.zeros((N, W), dtype=np.int64)  # numpy integers too
    expect_error(lambda: step(adapter), "step()", "torch.int64", "floating point")


@pytest.mark.parametrize("api", APIS)
def test_integer_rewards_are_rejected(api):
    adapter = EnvAdapter(ContractEnv(api, rewards=torch.ones(N, dtype=torch.long)))
    expect_error(
        lambda: step(adapter), "step()", "rewards", "torch.int64", "floating point", "rewards.float()"
    )


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "value,described",
    [
        (np.array([object()] * (N * W), dtype=object).reshape(N, W), "numpy object array"),
        ([[0.0] * W] * N, "a list"),
        (None, "None"),
    ],
)
def test_non_numeric_observations_are_rejected(api, value, described):
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["obs"] = value
    expect_error(lambda: step(adapter), "step()", f"{actor_output(api)} as", described, "torch.Tensor")


@pytest.mark.parametrize("api", APIS)
def test_rewards_as_a_python_list_are_rejected(api):
    adapter = EnvAdapter(ContractEnv(api, rewards=[0.0] * N))
    expect_error(lambda: step(adapter), "step()", "rewards as a list", "(16,)")


@pytest.mark.parametrize("api", APIS)
def test_wrong_step_arity_and_infos_type_are_rejected(api):
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.step = lambda actions: (torch.zeros(N, W), torch.zeros(N), torch.zeros(N, dtype=torch.bool))
    with pytest.raises(EnvOutputError, match=re.escape("ContractEnv.step() returned 3 values")):
        step(adapter)
    adapter = EnvAdapter(ContractEnv(api))
    real = adapter.env.step
    adapter.env.step = lambda actions: (*real(actions)[:-1], ["not", "a", "dict"])
    expect_error(lambda: step(adapter), "step()", "infos" if api == "legged_gym" else "extras", "a list")


# ---------------------------------------------------------------------------------------------- devices
@pytest.mark.parametrize("api", APIS)
def test_output_that_cannot_reach_the_training_device_is_rejected(api):
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["obs"] = torch.zeros(N, W, device="meta")  # no data to copy
    expect_error(lambda: step(adapter), "step()", actor_output(api), "on meta", "training device cpu")
    adapter = EnvAdapter(ContractEnv(api))
    adapter.env.override["rewards"] = torch.zeros(N, device="meta")
    expect_error(lambda: step(adapter), "step()", "rewards", "on meta", "training device cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("api", APIS)
def test_outputs_move_between_cpu_and_cuda_without_host_sync(api):
    # A CPU environment trained on the GPU: everything arrives on the GPU.
    adapter = EnvAdapter(ContractEnv(api), device="cuda")
    out = adapter.step(torch.zeros(N, 2, device="cuda"))
    assert all(t.device.type == "cuda" for t in out[:4]) and out[4]["time_outs"].device.type == "cuda"
    # A GPU environment trained on the CPU: everything arrives on the CPU.
    gpu = {
        k: v.cuda()
        for k, v in {
            "obs": torch.zeros(N, W),
            "critic": torch.zeros(N, C),
            "rewards": torch.zeros(N),
            "dones": torch.zeros(N, dtype=torch.long),
            "time_outs": torch.zeros(N, dtype=torch.bool),
        }.items()
    }
    env = ContractEnv(api, **gpu)
    env.device = torch.device("cuda")
    out = EnvAdapter(env, device="cpu").step(torch.zeros(N, 2))
    assert all(t.device.type == "cpu" for t in out[:4])
    # On the GPU the checks read metadata only: a step adds no host synchronisation.
    env = ContractEnv(api, **gpu)
    env.device = torch.device("cuda")
    adapter = EnvAdapter(env, device="cuda")
    actions = torch.zeros(N, 2, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            adapter.step(actions)
            adapter.get_observations()
    finally:
        torch.cuda.set_sync_debug_mode("default")
