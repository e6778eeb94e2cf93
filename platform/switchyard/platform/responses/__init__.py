"""OpenAI's Responses API (``/v1/responses``) and its durable state (``/v1/conversations``), on the run loop."""
