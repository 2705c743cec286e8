"""What runs a claimed job: its kind (kinds.py: sweep, serving study, generation, regression
check), where it runs (launchers.py: this host, a Ray cluster) and what both may ask of the worker
(context.py).

The worker (backend/queue/worker.py) claims a job, looks up its kind and launcher here and calls
their public methods; no kind or launcher reaches back into the worker. What they need stands here
or below (the lease, measuring in a child, the knee and mixed-precision searches, metrics; a job's
stored results through backend/records.py), so nothing here imports backend/queue/.
"""
