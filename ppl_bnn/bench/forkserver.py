"""What the pool's fork server imports before it forks any worker (:mod:`ppl_bnn.bench.pool`):
torch, JAX and everything else a cell needs (:func:`ppl_bnn.bench.worker.preload`), so that a
new worker starts in a fraction of a second instead of importing them for seconds. Nothing
here starts JAX's or torch's runtime (no XLA client, no thread pool): each worker sets its own
thread budget and device count first.
"""

from ppl_bnn.bench import worker

worker.preload()
