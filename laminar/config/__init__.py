"""One typed config tree for every Laminar command (see ``laminar.config.root``)."""

from laminar.config.loader import (
    dump_config,
    list_presets,
    load_config,
    write_resolved,
)
from laminar.config.root import LaminarConfig

__all__ = ["LaminarConfig", "dump_config", "list_presets", "load_config", "write_resolved"]
