-- is_graph_launch(name): whether an API call name is a CUDA/HIP graph launch.
-- Why: a graph launch replays many kernels for one host call, and every source names it its own
--   way: CUDA runtime and driver (cudaGraphLaunch, cuGraphLaunch), HIP (hipGraphLaunch), with the
--   ABI suffix nsys keeps (_v10000) and the per-thread-stream variants (_ptsz, _spt). The graph
--   coverage, the launch-bound rules and the step guards must agree on which calls these are.
-- Input: name VARCHAR (cuda_api.name or api_summary.name).
-- Definition: regexp '^(cuda|cu|hip)GraphLaunch(_ptsz|_spt)?(_v[0-9]+)?(_ptsz|_spt)?$'; NULL name: NULL.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO is_graph_launch(name) AS
    regexp_matches(name, '^(cuda|cu|hip)GraphLaunch(_ptsz|_spt)?(_v[0-9]+)?(_ptsz|_spt)?$');
