"""A tenant's members and roles."""
