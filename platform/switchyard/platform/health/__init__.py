"""Health endpoints."""
