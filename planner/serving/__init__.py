"""The serving model (continuous batching, queues, percentiles, goodput) and fleet sizing."""
