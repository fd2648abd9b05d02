"""One trace schema for simulator input, runtime output and replay.

``read_trace`` / ``write_trace`` move schema traces between CSV, Parquet and JSONL (and read
the Azure and Vidur serving layouts); ``synthesize`` draws seeded paper-shaped traces;
``load_workload`` gives a run its trajectories; ``trace_stats`` and ``plot_length_histogram``
describe a trace. Fitting (scipy, imported on use) is ``laminar.traces.fit.fit_trace``.
The schema itself is in ``laminar.traces.schema`` and ``traces/README.md``.
"""

from laminar.traces.io import read_trace, write_trace
from laminar.traces.plot import plot_length_histogram
from laminar.traces.stats import TraceStats, trace_stats
from laminar.traces.synth import list_synth_presets, preset_params, synthesize
from laminar.traces.workload import load_workload

__all__ = [
    "TraceStats",
    "list_synth_presets",
    "load_workload",
    "plot_length_histogram",
    "preset_params",
    "read_trace",
    "synthesize",
    "trace_stats",
    "write_trace",
]
