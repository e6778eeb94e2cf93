"""Inference: the OpenAI-compatible API in front of the accelerator pool, with admission and metering."""
