"""One home per serving engine (vLLM, SGLang, TensorRT-LLM): its memory rules, defaults and release table."""
