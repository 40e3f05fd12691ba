"""Model shapes, precisions, presets and Hugging Face import."""
