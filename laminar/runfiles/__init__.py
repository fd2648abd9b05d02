"""One reader per kind of run-directory file, shared by every command that reads it.

``laminar plot``, ``laminar calibrate`` and ``laminar train --resume`` read the files other
commands wrote; a run directory is user input like any other (it may be truncated by a full
disk, damaged, or another command's). Each file kind has one reader here, and every reader
goes through :mod:`laminar.inputfile` (regular file, size bound) and checks the columns or
keys its callers use (:mod:`laminar.runfiles.tables`): present, numbers finite and in range.
A bad file is one :class:`RunDirError` (exit 2) naming the file, the row and the column.

- :mod:`laminar.runfiles.train`: ``steps.csv``, ``summary.json``, ``trajectories.parquet``,
  ``events.csv``, ``kv.csv``, ``config.yaml`` (as a mapping) of a ``laminar train`` run;
- :mod:`laminar.runfiles.profile`: its ``profile/`` (what calibration fits);
- :mod:`laminar.runfiles.sim`: the files of a ``laminar simulate`` / ``replay`` run;
- a checkpoint's ``LATEST``, ``meta.json`` and ``pools.json``:
  ``laminar/runtime/run/ckptfiles.py`` (they hold the runtime's records).
"""

from laminar.runfiles.tables import RunDirError, file_error

__all__ = ["RunDirError", "file_error"]
