"""A tenant's API keys."""
