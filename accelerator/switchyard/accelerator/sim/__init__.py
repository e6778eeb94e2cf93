"""The Trainium fleet simulator: catalogs, the calibrated cost model, the serving engine, workloads and reports.

`switchyard.accelerator` exports its public names, each imported on first use.
"""
