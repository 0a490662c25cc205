"""JAX's persistent compilation cache for NumPyro fits: where it lives, switching it on, its hits.

Compiling a NumPyro fit's programs (the SVI loop, NUTS warm-up and sampling, and hundreds of small
eager operations) takes far longer than running them on a small BNN, and a new process compiles
them all again. JAX can store every compiled program on disk and load it in later processes; this
module switches that cache on whenever the NumPyro backend is used (on importing
:mod:`ppl_bnn.backends.numpyro.ops`, and at the start of every NumPyro :func:`~ppl_bnn.fit`, before
anything compiles), in the first of:

1. the directory given to ``configure_runtime(jax_cache=...)`` (``False``: no cache);
2. ``$PPL_BNN_JAX_CACHE`` (a directory; ``off``, ``0`` or ``false``: no cache);
3. ``$XDG_CACHE_HOME/ppl_bnn/jax``, else ``~/.cache/ppl_bnn/jax``.

A JAX cache directory set by the user (``jax.config.update("jax_compilation_cache_dir", ...)`` or
``JAX_COMPILATION_CACHE_DIR``), before or after this module set one, is used as it is. A
directory that cannot be written is reported once and the fit runs without a cache. A corrupt
entry (e.g. from a process killed while writing it) makes JAX warn and compile the program again;
JAX never replaces the entry, so delete the directory to be rid of the warning.

JAX opens its cache once, on the first compilation that finds a directory set, and ignores a later
change of directory until ``jax.experimental.compilation_cache.compilation_cache.reset_cache()``;
:func:`enable_jax_cache` resets it whenever it changes the directory, so a setting changed between
fits takes effect at the next one.

:func:`compile_counter` counts compilations and cache hits for the whole process;
:class:`FitCompilations` turns the counts of one fit into ``FitResult.info["jax_cache"]``. Nothing
here imports JAX until the NumPyro backend is used.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Environment variable naming the cache directory, or switching the cache off.
ENV_VAR = "PPL_BNN_JAX_CACHE"

#: Values of :data:`ENV_VAR` (any case) that switch the cache off.
OFF_VALUES = frozenset({"off", "0", "false"})

#: JAX's events: every program handed to XLA, compiled or loaded from the persistent cache; a load.
_PROGRAM_EVENT = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_retrieval_time_sec"


class _Settings:
    """Process-wide state: the caller's choice and what this module last gave JAX."""

    def __init__(self) -> None:
        self.requested: Path | bool = True  # True: $PPL_BNN_JAX_CACHE, else the user cache dir
        self.applied: str | None = None
        self.warned: set[str] = set()
        self.counter: CompileCounter | None = None


_settings = _Settings()


def set_jax_cache(setting: str | os.PathLike[str] | bool) -> None:
    """Choose the cache directory of later NumPyro fits (``configure_runtime(jax_cache=...)``).

    Args:
        setting: A directory; ``False`` for no cache; ``True`` for the default
            (``$PPL_BNN_JAX_CACHE``, else the user cache directory).

    Raises:
        TypeError: If ``setting`` is neither a path nor a bool.
        ValueError: If ``setting`` is an empty path.
    """
    if isinstance(setting, bool):
        _settings.requested = setting
        return
    if not isinstance(setting, (str, os.PathLike)):
        raise TypeError(
            f"jax_cache must be a directory, True or False, got {type(setting).__name__} "
            f"{setting!r}"
        )
    if not str(os.fspath(setting)).strip():
        raise ValueError(f"jax_cache must name a directory, got {setting!r}")
    _settings.requested = Path(setting).expanduser()


def requested_dir() -> Path | None:
    """The directory ppl_bnn's settings ask for (see the module docstring), or None for none."""
    if isinstance(_settings.requested, Path):
        return _settings.requested
    if _settings.requested is False:
        return None
    value = os.environ.get(ENV_VAR, "").strip()
    if value.lower() in OFF_VALUES:
        return None
    if value:
        return Path(value).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "ppl_bnn" / "jax"


def _writable(path: Path) -> bool:
    """Whether ``path`` exists or can be created, and a file can be written in it; a warning
    (once per directory) when not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        if str(path) not in _settings.warned:
            _settings.warned.add(str(path))
            logger.warning(
                "JAX compilation cache: cannot write to %s (%s); fitting without a cache "
                "(set %s to another directory, or to 'off')",
                path,
                err,
                ENV_VAR,
            )
        return False
    return True


def enable_jax_cache() -> str | None:
    """Point JAX's persistent cache at the directory the settings ask for; idempotent.

    Call it before the programs to be cached compile. It also registers the process's
    :func:`compile_counter`.

    Returns:
        The cache directory in use (the user's own JAX setting, if any), or None if there is none.
    """
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    compile_counter()
    current = jax.config.jax_compilation_cache_dir
    if current is not None and current != _settings.applied:
        # Set by the user (jax.config or JAX_COMPILATION_CACHE_DIR): theirs to manage. Set
        # after ours was in use, it takes effect only once JAX's cache is reset.
        if _settings.applied is not None:
            compilation_cache.reset_cache()
            _settings.applied = None
        return current if jax.config.jax_enable_compilation_cache else None
    wanted = requested_dir()
    path = str(wanted.absolute()) if wanted is not None and _writable(wanted) else None
    if path != current:
        jax.config.update("jax_compilation_cache_dir", path)
        if path is not None:
            # Cache every program, however small or quick to compile: a NumPyro fit dispatches
            # hundreds of small eager operations (model initialisation, guide and kernel set-up),
            # each below JAX's default threshold of 1 s of compile time but together seconds,
            # which a new process would otherwise compile again. -1: no size limit, and none
            # set by JAX for the file system either.
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        # JAX opens its cache once; without a reset a new directory would be ignored.
        compilation_cache.reset_cache()
        _settings.applied = path
        logger.debug("JAX compilation cache: %s", path or "off")
    return path if jax.config.jax_enable_compilation_cache else None


class CompileCounter:
    """Counts the XLA programs this process compiles and those it loads from the persistent cache.

    JAX reports every program handed to XLA (compiled, or loaded from the cache) and every load
    through :mod:`jax.monitoring`, whose listeners stay registered for the life of the process:
    use the one counter of :func:`compile_counter` and compare its counts before and after
    (:class:`FitCompilations`), so that repeated fits never add listeners.
    """

    def __init__(self) -> None:
        from jax import monitoring

        self.programs = 0
        self.cache_hits = 0
        monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, name: str, _duration: float, **_: Any) -> None:
        if name == _PROGRAM_EVENT:
            self.programs += 1
        elif name == _CACHE_HIT_EVENT:
            self.cache_hits += 1

    @property
    def compiles(self) -> int:
        """Programs compiled by XLA (not loaded from the cache)."""
        return self.programs - self.cache_hits

    def snapshot(self) -> tuple[int, int]:
        """``(compiles, cache_hits)`` so far."""
        return self.compiles, self.cache_hits


def compile_counter() -> CompileCounter:
    """This process's one :class:`CompileCounter`, created (and its listener registered) once."""
    if _settings.counter is None:
        _settings.counter = CompileCounter()
    return _settings.counter


class FitCompilations:
    """One fit's compilations and cache hits: enables the cache, then counts from here.

    Concurrent fits in threads of one process count each other's programs.
    """

    def __init__(self) -> None:
        self.dir = enable_jax_cache()
        self._start = compile_counter().snapshot()

    def finish(self) -> dict[str, Any]:
        """``{"dir", "compiles", "cache_hits"}`` since construction, also logged at INFO."""
        now = compile_counter().snapshot()
        compiles, hits = (b - a for a, b in zip(self._start, now, strict=True))
        logger.info(
            "JAX compilation cache: %d hits, %d compilations (%s)",
            hits,
            compiles,
            self.dir or "no cache",
        )
        return {"dir": self.dir, "compiles": compiles, "cache_hits": hits}
