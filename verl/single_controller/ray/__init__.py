from verl.single_controller.ray.base import (
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    ResourceError,
    WorkerError,
)

__all__ = ["RayClassWithInitArgs", "RayResourcePool", "RayWorkerGroup", "ResourceError", "WorkerError"]
