"""The audit logs (a tenant's and the operator's): recorded with each change, read a page at a time or exported as
CSV, filtered by action, actor and UTC days, with actors named for people to read."""
