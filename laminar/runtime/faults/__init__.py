"""Faults in the real runtime: detection (watchdog, supervisor), injection, recovery records."""
