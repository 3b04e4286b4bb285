"""What every part of the engine shares: the inputs and results that travel through
workflow history (`models`, `dependency_models`), how long a run may live (`lifetime`),
and the spans and metrics of its units of work (`telemetry`).
"""
