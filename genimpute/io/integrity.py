"""Refusing compressed inputs that end early.

A BGZF file (bgzipped VCF, BCF) cut at a block boundary decompresses
cleanly up to the cut: htslib only warns that the end-of-file block is
missing, and a reader then sees a shorter file as if it were whole. A
truncated download or copy of a panel or target would so give a silently
wrong imputation. Every BGZF file ends with the same empty block, so its
last 28 bytes tell; a plain gzip file has no such marker and is read to its
end instead, where a missing end of stream shows.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from genimpute.errors import InputError
from genimpute.io.bgzf import EOF_BLOCK

GZIP_MAGIC = b"\x1f\x8b"
_READ = 1 << 20


def is_bgzf(head: bytes) -> bool:
    """The first bytes of a gzip member carrying BGZF's BC extra field."""
    return len(head) >= 16 and head[:4] == b"\x1f\x8b\x08\x04" and head[12:14] == b"BC"


def check_complete(path: str | Path) -> None:
    """Raise InputError if `path` is gzip or BGZF compressed and ends before
    its compressed stream does; a file that is not compressed passes."""
    path = Path(path)
    with open(path, "rb") as handle:
        head = handle.read(18)
        if head[:2] != GZIP_MAGIC:
            return
        if is_bgzf(head):
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - len(EOF_BLOCK)))
            if handle.read() != EOF_BLOCK:
                raise InputError(f"{path}: ends without the BGZF end-of-file block: truncated? "
                                 "(download or copy it again)")
            return
        handle.seek(0)
        if not _gzip_stream_ends(handle):
            raise InputError(f"{path}: the gzip stream ends early: truncated? (download or copy it again)")


def _gzip_stream_ends(handle) -> bool:
    """Read every gzip member of `handle` to its end; False where the file
    stops inside one (or holds bytes that are not gzip)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    while True:
        chunk = handle.read(_READ)
        if not chunk:
            return inflate.eof
        try:
            inflate.decompress(chunk)
            while inflate.eof and inflate.unused_data:  # concatenated members, as gzip allows
                rest = inflate.unused_data
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                inflate.decompress(rest)
        except zlib.error:
            return False
