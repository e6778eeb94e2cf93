"""The execution kernel: how an agent loop is driven durably, whatever front end asked for it.

Runs (``platform/runs``) and responses (``platform/responses``) are front ends: each has its own schemas, store
and events, and hands its jobs to :func:`kernel.execute`. The kernel claims a job with a lease and keeps it alive
(``lease``), admits each model call (``admitted``), waits out a model backend briefly away (``outages``), counts
each job as its tenant's turn (``turns``), drives the loop with a checkpoint per transition and bills each model
step once (``steps``), stops a call when the job is cancelled (``stop_on_cancel``), streams stored events
(``events``), finds jobs left behind (``recovery``), and runs on the workers' threads (``worker``). Front ends
import the kernel, never each other; the kernel knows neither.
"""
