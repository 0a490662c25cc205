"""The contracts between the model, the methods and the backends, below all three: the backend
registry (:mod:`.registry`), what a backend's ``ops`` and ``linearised`` modules provide and the
:class:`~ppl_bnn.engine.contracts.Target` a fit hands to a method's runner
(:mod:`.contracts`). Nothing here imports the model, a method or a backend at run time.
"""
