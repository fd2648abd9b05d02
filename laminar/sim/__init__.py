"""SimPy discrete-event simulator of a whole RL post-training cluster."""
