"""Ingest: every per-rank export of a folder into the workspace, locally, with --jobs N or on Dask.

One module per job: `run` (the orchestration: `ingest(paths, db)`), `discovery` (which inputs a
folder holds, which rank each process is), `inputs` (dedupe, number ranks, refuse mixed formats),
`landing` (one file's rows in one transaction, or a worker's batch), `rank_task` (what a worker
does with a batch: load, classify, the rank-local step), `rank_store` (the workers' results on
disk), `rank_pipeline` and `rank_early` (the rank-local step beside a local load), `executors`
(local processes or Dask), `workers` (the client's side of a parallel ingest) and `report` (what
an ingest says). Empty on purpose: a worker importing `rank_task` imports neither the
orchestration nor the workspace.
"""
