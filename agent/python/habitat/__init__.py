"""Habitat agent: capture one training iteration on this GPU for prediction.

    import habitat
    tracker = habitat.OperationTracker(model_name="resnet50", batch_size=64)
    with tracker.track():
        train_step()                 # forward, backward, optimizer step
    trace = tracker.get_tracked_trace(
        iteration_wall_ns=habitat.time_iteration(train_step))  # optional
    trace.save("resnet50.trace")     # a habitat.v1.Trace protobuf file

Then predict with the CLI: `habitat predict resnet50.trace`.
"""

from habitat.tracker import (OperationTracker, Trace, TrackingError, measure_gpu_busy,
                             time_iteration)

__all__ = ["OperationTracker", "Trace", "TrackingError", "measure_gpu_busy",
           "time_iteration"]
__version__ = "0.1.0"
