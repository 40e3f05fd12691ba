"""How a replica spreads over GPUs and the links it crosses."""
