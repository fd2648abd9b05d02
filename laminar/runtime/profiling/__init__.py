"""What `laminar calibrate` needs from a run: the profile/ recorders and the machine speed probe."""
