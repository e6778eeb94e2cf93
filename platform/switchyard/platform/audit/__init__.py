"""The tenant audit log."""
