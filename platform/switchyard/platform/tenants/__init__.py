"""Tenants, managed by platform operators."""
