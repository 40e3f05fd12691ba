"""Memory, roofline work and step time: what one GPU does per step, and its evidence."""
