"""Billing by compute used: money, rate cards, the usage ledger, budgets, invoices and reconciliation."""
