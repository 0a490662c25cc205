"""Download a group of data files from a mirror, verified against the checksum manifest."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ppl_bnn.data.checksums import group_files, manifest, sha256_file
from ppl_bnn.data.errors import DatasetCorruptError, DatasetFetchError
from ppl_bnn.data.paths import resolve_data_dir

logger = logging.getLogger(__name__)

_SCHEMES = ("http", "https", "file")
_CHUNK = 1 << 20


def fetch(
    group: str,
    url: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    timeout: float = 60.0,
) -> list[Path]:
    """Download every manifest file of ``group`` into the data directory.

    File ``<group>/<rest>`` of the manifest is fetched from ``url.rstrip("/") + "/" + <rest>``
    (so ``url=http://host/uci`` must serve ``bostonHousing/data/data.txt`` and so on) and written
    to ``<data_dir>/<group>/<rest>``. Each download goes to a temporary file in the target folder,
    is fsynced, and is moved into place with :func:`os.replace` only after its SHA-256 matches the
    manifest, so a failed or tampered download leaves no file behind. Files already present with
    the right hash are skipped; present files with a wrong hash are replaced.

    Example:
        ``fetch("uci", "https://example.org/mirror/uci", "~/data")``

    Args:
        group: ``"uci"``, ``"mnist"`` or ``"fashion-mnist"``.
        url: base address of the group's files (``http``, ``https`` or ``file``).
        data_dir: target data directory; see :func:`ppl_bnn.data.resolve_data_dir`.
        timeout: seconds to wait on each connection.

    Returns:
        The files written by this call (empty if all were already present and correct).

    Raises:
        ValueError: unknown ``group`` or unsupported URL scheme.
        DatasetCorruptError: a downloaded file's SHA-256 differs from the manifest (names the file
            and the URL); the file is not written.
        DatasetFetchError: a download failed (HTTP error status, unreachable host, cut-off
            transfer).
    """
    rels = group_files(group)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _SCHEMES:
        raise ValueError(
            f"url must start with one of {', '.join(s + '://' for s in _SCHEMES)}; got {url!r}"
        )
    root = resolve_data_dir(data_dir)
    base = url.rstrip("/")
    written: list[Path] = []
    skipped = 0
    logger.info("fetching %d %s files from %s into %s", len(rels), group, base, root)
    for rel in rels:
        target = root / rel
        expected = manifest()[rel]
        if target.is_file() and sha256_file(target) == expected:
            skipped += 1
            continue
        if target.exists():
            logger.warning("replacing %s: its SHA-256 does not match the manifest", target)
        file_url = f"{base}/{urllib.parse.quote(rel.split('/', 1)[1])}"
        _download(file_url, target, expected, timeout)
        written.append(target)
        logger.debug("fetched %s", target)
    logger.info("%s: %d files fetched, %d already present", group, len(written), skipped)
    return written


def _download(url: str, target: Path, expected: str, timeout: float) -> None:
    """Stream ``url`` to ``target`` atomically, checking its SHA-256 before the final rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".part"
    )
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(handle, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    while chunk := response.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except urllib.error.HTTPError as exc:
                exc.close()  # it holds the open response; close it before raising
                raise DatasetFetchError(
                    f"could not download {url} to {target}: HTTP {exc.code} {exc.reason}", url
                ) from exc
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise DatasetFetchError(
                    f"could not download {url} to {target}: {reason}", url
                ) from exc
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != expected:
            raise DatasetCorruptError(
                f"downloaded {url} for {target} has SHA-256 {actual}, the manifest expects "
                f"{expected}; the file was not written. Check that the URL serves the original "
                "files.",
                target,
            )
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable where the platform allows it (POSIX)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
