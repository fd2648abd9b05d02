"""One trace schema for simulator input, runtime output and replay.

``read_trace`` / ``write_trace`` move schema traces between CSV, Parquet and JSONL (and read
the Azure and Vidur serving layouts); ``synthesize`` draws seeded paper-shaped traces;
``load_workload`` gives a run its trajectories; ``fit_trace`` and ``trace_stats`` describe a
trace. The schema itself is in ``laminar.traces.schema`` and ``traces/README.md``.
"""

from laminar.traces.io import read_trace, write_trace
from laminar.traces.synth import list_synth_presets, preset_params, synthesize
from laminar.traces.workload import load_workload

__all__ = [
    "list_synth_presets",
    "load_workload",
    "preset_params",
    "read_trace",
    "synthesize",
    "write_trace",
]
