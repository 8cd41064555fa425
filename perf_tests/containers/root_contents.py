"""What identifies a root filesystem folder's contents (bwrap's images, podman's --rootfs): a hash
of every file in it, so that any file added, removed or changed anywhere changes it (a module
dropped into site-packages outside any package's RECORD once slowed training 64% under an
unchanged identity).

Reading every byte costs seconds for a 1.3 GB image and about a minute for an NGC image's size,
so the hash is cached under what `find` says of every entry (path, kind, permissions, size,
modification time, inode, a link's target), which it lists without reading a file: a later
session on an unchanged folder costs that listing alone, and one on a changed folder reads only
the files whose listing changed. Left out: what a container does not take from the image
(/proc, /dev, /sys, /tmp, /run: the runtime mounts its own), what a running system writes
(/var/log, /var/cache, /var/tmp), and other file systems mounted inside (a live `/` used as an
image has its network mounts there).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rn50_model.files import write_text_atomically

CACHE_VERSION = 1
LEFT_OUT = ("proc", "dev", "sys", "tmp", "run", "var/log", "var/cache", "var/tmp")
# find's line for an entry, each field ended by a NUL: path, kind (f d l ...), permissions, size,
# modification time, inode, a link's target.
LISTING = "%p\\0%y\\0%m\\0%s\\0%T@\\0%i\\0%l\\0"
FIELDS = 7
BLOCK = 1 << 20


class ListingError(OSError):
    """`find` could not list the folder: its own line."""


def cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rn50_perf" / \
        "root-contents"


def starting_points(root: Path, inside: str = "") -> list[str]:
    """The entries of `root/inside` that `find` lists from, sorted: all but LEFT_OUT and other
    file systems' mount points; a folder holding one of LEFT_OUT (/var) gives its other
    entries instead of itself."""
    device = root.stat().st_dev
    points = []
    for entry in sorted(os.listdir(root / inside)):
        path = os.path.join(inside, entry)
        status = (root / path).lstat()
        if path in LEFT_OUT or status.st_dev != device:
            continue
        if stat.S_ISDIR(status.st_mode) and any(left.startswith(path + "/")
                                                for left in LEFT_OUT):
            points += starting_points(root, path)
        else:
            points.append(str(root / path))
    return points


def listing(root: Path) -> bytes:
    """`find`'s listing of `root` (LISTING), but LEFT_OUT, on its own file system; one pass
    from the entries it keeps, so that nothing is tested against LEFT_OUT entry by entry."""
    done = subprocess.run(["find", *starting_points(root), "-xdev", "-printf", LISTING],
                          capture_output=True)
    if done.returncode != 0:
        line = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise ListingError(f"find {root} failed: {line}")
    return done.stdout


def entries(root: Path, listed: bytes) -> list[list[str]]:
    """The listing's entries (FIELDS strings each, the path relative to `root`), by path."""
    fields = listed.decode(errors="surrogateescape").split("\0")[:-1]
    skip = len(str(root)) + 1
    found = [fields[at:at + FIELDS] for at in range(0, len(fields), FIELDS)]
    return sorted([entry[0][skip:], *entry[1:]] for entry in found)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(BLOCK), b""):
                digest.update(block)
    except OSError as error:
        return f"unreadable: {error.strerror}"
    return digest.hexdigest()


def content_hash(root: Path, listed: bytes, known: dict[str, list[str]]) -> tuple[str, dict]:
    """The hash of every entry (path, kind, permissions, a link's target, a file's bytes), and
    each file's (size, time, inode, digest): a file's bytes are read only where `known` has no
    digest for its size, time and inode."""
    found = entries(root, listed)
    files = {}
    for path, kind, _, size, mtime, inode, _ in found:
        if kind == "f":
            before = known.get(path)
            files[path] = before if before and before[:3] == [size, mtime, inode] else \
                [size, mtime, inode]
    to_read = [path for path, stamp in files.items() if len(stamp) == 3]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for path, digest in zip(to_read, pool.map(lambda name: file_digest(root / name),
                                                   to_read)):
            files[path] = [*files[path], digest]
    digest = hashlib.sha256()
    for path, kind, mode, _, _, _, target in found:
        held = files[path][3] if kind == "f" else target
        digest.update(f"{path}\0{kind}\0{mode}\0{held}\n".encode(errors="surrogateescape"))
    return digest.hexdigest(), files


def root_content_hash(root: Path) -> str:
    """sha256 (hex) of every entry of `root` but LEFT_OUT: from the cache where the folder's
    listing is the one it was cached under, else computed, reading only the changed files."""
    root = root.resolve()
    listed = listing(root)
    key = hashlib.sha256(listed).hexdigest()
    name = hashlib.sha256(str(root).encode()).hexdigest()[:24]
    summary_file, files_file = (cache_folder() / f"{name}.{kind}" for kind in ("key", "files"))
    try:
        summary = json.loads(summary_file.read_text())
        if summary == {**summary, "version": CACHE_VERSION, "key": key}:
            return summary["content"]
    except (OSError, ValueError, TypeError):
        pass
    try:
        known = json.loads(files_file.read_text())
    except (OSError, ValueError):
        known = {}
    content, files = content_hash(root, listed, known if isinstance(known, dict) else {})
    try:
        cache_folder().mkdir(parents=True, exist_ok=True)
        write_text_atomically(files_file, json.dumps(files, separators=(",", ":")))
        write_text_atomically(summary_file, json.dumps(
            {"version": CACHE_VERSION, "root": str(root), "key": key, "content": content}))
    except OSError:
        pass   # a read-only home: the next session reads the files again
    return content
