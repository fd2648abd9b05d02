"""One `laminar train` run: launch, the mode loops, inputs checked first, outputs, resume."""
