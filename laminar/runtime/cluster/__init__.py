"""Machines and processes: node-local paths, emulated machines, placement, driver sessions."""
