"""Model, hardware and memory facts derived from data files, for the simulator and the planner."""
