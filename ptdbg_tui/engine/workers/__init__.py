"""Where the metric work runs: a tensor pair's task as a worker runs it (:mod:`.tasks`), worker
processes started from a fork server (:mod:`.pool`, preloading :mod:`.worker_preload` and
:mod:`.fused_preload`), a Dask cluster (:mod:`.cluster`), and a forked child working on what the
process holds (:mod:`.forked`)."""
