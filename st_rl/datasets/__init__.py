"""Reference data: motion files for AMP."""

from st_rl.datasets.motion_loader import AMPLoader, AmpObservationWrapper, MotionLoader, gait_distance

__all__ = ["AMPLoader", "AmpObservationWrapper", "MotionLoader", "gait_distance"]
