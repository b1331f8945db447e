"""The store: the workspace file and what every connection to it holds.

One module per job: `workspace` (open or create the DuckDB file, the schema, the live views),
`schema` (the canonical tables, schema*.sql), `query_layer` (the declared queries of queries/
and the modules' statement files), `live_layer` (what a workspace and a worker's database
share), `duck` (DuckDB connections, settings and plain rows), `workspace_info` (what `info`
prints) and `job_scope` (one job of a multi-job workspace). Empty on purpose: importing one of
them imports no other.
"""
