"""The relay tier (paper §4): relays hold weights in CPU memory and pass them down a chain."""
