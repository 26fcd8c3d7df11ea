"""The one file hash of the package: SHA-256, read in chunks, and what a record keeps of a finished file."""

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

CHUNK_BYTES = 1 << 22


def sha256_of(path: str | os.PathLike, each_chunk: Callable[[bytes], None] | None = None) -> str:
    """The SHA-256 of the file `path` (hex), read in chunks; `each_chunk` also sees every chunk, in order."""
    return feed(hashlib.sha256(), path, each_chunk).hexdigest()


def feed(
    digest: "hashlib._Hash", path: str | os.PathLike, each_chunk: Callable[[bytes], None] | None = None
) -> "hashlib._Hash":
    """Update `digest` with the bytes of `path` (and pass each chunk to `each_chunk`); returns `digest`."""
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            if each_chunk is not None:
                each_chunk(chunk)
    return digest


def file_entry(path: Path) -> dict[str, int | str]:
    """What a record keeps of a finished file: its size in bytes and SHA-256."""
    return {"bytes": path.stat().st_size, "sha256": sha256_of(path)}
