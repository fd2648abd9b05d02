"""One trace schema for simulator input, runtime output and replay."""
