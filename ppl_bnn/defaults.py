"""Defaults the command line shows in its help and the library runs with, importable without
the numerical stack (``ppl-bnn --help`` answers at once)."""

#: The contestants of ``compare`` without ``methods=``: the baselines the field compares against
#: (MAP, the GGN Laplace, a deep ensemble, MC dropout, SWAG), mean-field VI, SGLD and NUTS.
DEFAULT_METHODS = ("nuts", "sgld", "svi", "map", "laplace", "ensemble", "swag", "mcdropout")
#: Runs a sweep gives a cell (or a reference) that fails or times out, over its runs, before it
#: keeps the failure: a crash of the machine or a full disk passes, a cell that cannot run
#: still ends.
MAX_ATTEMPTS = 3
