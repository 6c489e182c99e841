"""Offscreen MuJoCo rendering of a task's robot: frames and MP4 videos (``st-rl play --video``). Set
``MUJOCO_GL`` (``egl``, the default here, or ``osmesa``) before importing MuJoCo; MP4 needs imageio-ffmpeg."""

from __future__ import annotations

import ctypes.util
import os
import platform
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["DEFAULT_GEOM_GROUPS", "QUALITIES", "VideoRecorder", "render_frame", "set_default_gl_backend"]


def set_default_gl_backend(backend: str = "egl") -> str | None:
    """Set ``MUJOCO_GL`` to ``backend`` if unset, MuJoCo not yet imported, on Linux with the backend's library
    installed; return the value in force."""
    if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules and platform.system() == "Linux":
        library = {"egl": "EGL", "osmesa": "OSMesa"}.get(backend)
        if library is None or ctypes.util.find_library(library) is not None:
            os.environ["MUJOCO_GL"] = backend
    return os.environ.get("MUJOCO_GL")


QUALITIES = ("fast", "medium", "high")
DEFAULT_GEOM_GROUPS = (0, 1, 2, 3)
_S = TypeVar("_S", bound="_Scene")


def _check_renderable(env: Any) -> None:
    batch = getattr(env, "batch", None)  # a mujoco.batch.Batch
    if not (hasattr(env, "dt") and hasattr(batch, "get_model") and hasattr(batch, "get_data")):
        why = "has no MuJoCo simulation to render (video needs quadruped_flat / quadruped_rough)"
        raise ValueError(f"{type(env).__name__} {why}; run without a video (--no-video, video=None).")


class _Scene:
    """An offscreen renderer of simulation ``env_id`` of a MuJoCo task at a ``quality``, from ``camera``."""

    def __init__(
        self,
        env: Any,
        env_id: int,
        width: int,
        height: int,
        camera: str | None,
        quality: str,
        geom_groups: Sequence[int],
    ) -> None:
        _check_renderable(env)
        if quality not in QUALITIES:
            raise ValueError(f"quality must be one of {QUALITIES}, got {quality!r}")
        import mujoco as mujoco_module

        mujoco: Any = mujoco_module
        self.mujoco, self.env_id = mujoco, int(env_id)
        self.model = env.batch.get_model(self.env_id)
        if quality in ("fast", "medium"):
            self.model.vis.quality.offsamples = 0
        if quality == "medium":
            self.model.vis.quality.shadowsize = min(int(self.model.vis.quality.shadowsize), 1024)
        self.data = mujoco.MjData(self.model)
        try:
            self.renderer = mujoco.Renderer(self.model, height=height, width=width)
        except Exception as e:
            backend = os.environ.get("MUJOCO_GL", "<unset>")
            raise RuntimeError(
                f"MuJoCo offscreen rendering failed with MUJOCO_GL={backend}: {type(e).__name__}: {e}. "
                "Set MUJOCO_GL before Python imports MuJoCo: MUJOCO_GL=egl (needs libEGL: a GPU driver or Mesa) or "
                "MUJOCO_GL=osmesa (software; apt-get install libosmesa6). Or run without a video (--no-video)."
            ) from e
        flag = mujoco.mjtRndFlag
        self.flags = {flag.mjRND_SHADOW: 0, flag.mjRND_REFLECTION: 0} if quality == "fast" else {}
        self.option = mujoco.MjvOption()
        for g in range(len(self.option.geomgroup)):
            self.option.geomgroup[g] = 1 if g in geom_groups else 0
        self.camera: Any = camera
        if camera is None or mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera) < 0:
            if camera is not None:
                warnings.warn(f"model has no camera {camera!r}; using a free tracking camera", stacklevel=3)
            self.camera = mujoco.MjvCamera()
            self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            self.camera.trackbodyid = int(getattr(env, "base_body", 1))
            self.camera.distance, self.camera.elevation, self.camera.azimuth = 2.0, -20.0, 90.0

    def frame(self, env: Any) -> np.ndarray:
        """Render the current state of the filmed environment (H, W, 3) uint8."""
        env.batch.get_data(self.env_id, self.data)
        self.mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera, scene_option=self.option)
        for flag, value in self.flags.items():
            self.renderer.scene.flags[flag] = value
        return self.renderer.render()

    def close(self) -> None:
        self.renderer.close()  # idempotent

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class VideoRecorder(_Scene):
    """Films env ``env_id`` of a MuJoCo task into an MP4 in real time, as ``render=`` of :func:`evaluate_policy`.

    ``camera``: the model's camera (``"track"`` follows the trunk; None or missing: a free tracking camera);
    ``quality``: ``"fast"`` (no shadows, reflections or anti-aliasing), ``"medium"`` (1024 px shadows) or
    ``"high"`` (the model's own visual settings); ``geom_groups``: drawn (the quadruped's legs: group 3)."""

    def __init__(
        self,
        env: Any,
        path: str,
        env_id: int = 0,
        fps: float = 25.0,
        width: int = 640,
        height: int = 360,
        camera: str | None = "track",
        quality: str = "medium",
        geom_groups: Sequence[int] = DEFAULT_GEOM_GROUPS,
    ) -> None:
        self.writer: Any = None
        _check_renderable(env)
        try:
            import imageio.v2 as iio
        except ImportError as e:
            raise ImportError("Writing videos needs imageio: pip install imageio imageio-ffmpeg") from e
        self.path = path
        self.stride = max(1, int(round(1.0 / (float(fps) * float(env.dt)))))
        self.fps = 1.0 / (self.stride * float(env.dt))
        super().__init__(env, env_id, width, height, camera, quality, geom_groups)
        self.num_frames, self._calls = 0, 0
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            options = dict(mode="I", codec="libx264", pixelformat="yuv420p", quality=7, macro_block_size=8)
            self.writer = iio.get_writer(path, format="FFMPEG", fps=self.fps, **options)  # type: ignore[arg-type]
        except Exception as e:
            self.close()
            fix = "Install the ffmpeg plugin: pip install imageio-ffmpeg"
            raise RuntimeError(f"Cannot open an MP4 writer for {path}: {e}. {fix}") from e

    def __call__(self, env: Any) -> None:
        if self._calls % self.stride == 0:
            self.writer.append_data(self.frame(env))
            self.num_frames += 1
        self._calls += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        super().close()


def render_frame(
    env: Any,
    path: str | None = None,
    env_id: int = 0,
    width: int = 640,
    height: int = 360,
    camera: str | None = "track",
    quality: str = "high",
    geom_groups: Sequence[int] = DEFAULT_GEOM_GROUPS,
) -> np.ndarray:
    """Render one frame of a MuJoCo task (and write it to ``path`` as PNG when given)."""
    with _Scene(env, env_id, width, height, camera, quality, geom_groups) as scene:
        image = scene.frame(env)
    if path is not None:
        import imageio.v2 as iio

        iio.imwrite(path, image)
    return image
