"""Habitat agent: capture one training iteration on this GPU for prediction.

    import habitat_agent
    tracker = habitat_agent.OperationTracker(model_name="resnet50", batch_size=64)
    with tracker.track():
        train_step()                 # forward, backward, optimizer step
    trace = tracker.get_tracked_trace(
        iteration_wall_ns=habitat_agent.time_iteration(train_step))  # optional
    trace.save("resnet50.trace")     # a habitat.v1.Trace protobuf file

Then predict with the CLI: `habitat predict resnet50.trace`, or from Python:
`trace.predict(server="HOST:50051")` (habitat_agent.client, which re-exports the
habitat-client package: grpcio and protobuf, no torch).
"""

__all__ = ["OperationTracker", "Trace", "TrackingError", "measure_gpu_busy",
           "time_iteration"]
__version__ = "0.1.0"


def __getattr__(name):
    # The tracker (torch and the _C extension) loads on first use, so
    # habitat_agent.client works where torch is not installed.
    if name in __all__:
        from habitat_agent import tracker
        return getattr(tracker, name)
    if name == "client":  # habitat_agent.client.format_table(...) without importing it first
        import importlib
        return importlib.import_module("habitat_agent.client")
    raise AttributeError(f"module 'habitat_agent' has no attribute {name!r}")
