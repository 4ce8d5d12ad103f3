#!/usr/bin/env python3
"""crashfs: a test-only FUSE filesystem that knows what a power loss would keep.

It passes every operation through to a backing folder (the *live* state, what
programs see) and keeps, in memory, a *durable image* of that folder under the
POSIX rules (issue 50):

- a file's data is durable once it is fsynced (fsync or fdatasync): its bytes at
  that moment become the inode's durable bytes;
- a name (create, mkdir, symlink, rename, link, unlink, rmdir) is durable once
  its folder is fsynced: the folder's current entries become its durable entries.
  A rename between two folders needs both folders synced; with only one, the file
  may durably have both names or none, as POSIX allows;
- an inode created and never fsynced has empty durable data; a folder that becomes
  durably reachable without being fsynced itself is durably empty.

Identity survives a power loss: every inode gets a node id, reported as `st_ino`
(so `(dev, ino, mtime)` identities recorded by the program before the cut still
match after it), and the durable mtime is kept with the durable bytes.

A *cut* freezes the filesystem: the operation that triggered it and every later
one is held (reads too), so nothing more can become durable. The driver then
SIGKILLs every process using it, writes what survives into a new folder
(`materialize`), fails the held requests (`thaw`: a SIGKILLed process stuck in a
FUSE request dies only once it is answered), waits until all are gone and every
file is closed, and `reboot`s: the same mount now serves the new folder, as a
disk comes back after a power loss (same device number; a fresh unmount and
mount would get another st_dev, and with it other file identities). Kernel
caches cannot hide the switch: entry, attribute and negative timeouts are 0.
Four fault models, chosen per mount (`--model`):

- `posix`: names and data both as above (the strict model);
- `lazy`: LazyFS's cache-clearing fault: names are kept as they are at the cut,
  only unsynced file data is lost (a file renamed into place keeps its name but
  reverts to its last synced bytes: empty if never synced);
- `torn`: as `lazy`, but a file that grew by unsynced appends keeps a random
  prefix of them (writeback reached part of the data: a torn last record);
- `kill`: nothing is lost (a kill -9 of every process, no power loss): the
  control, which any program that survives kill -9 must pass.

A cut is triggered by the driver at once (`cut`), or armed in advance (`arm`):
"before" or "after" the Nth operation of a kind whose path matches a regular
expression (and, for writes, whose bytes contain a string). Every mutating
operation is counted, so a seeded driver can also cut after the Nth of all.

Control: a Unix socket; one JSON object per line in, one per line out.
Locks (flock, fcntl) are left to the kernel, which handles them locally when the
filesystem does not implement them: they work between processes on this mount
and die with their holders, as on any local filesystem.

Run: python3 crashfs.py BACKING MOUNTPOINT --control SOCKET [--model posix]
     [--ids IDS.json]   (node ids of a folder an earlier crashfs materialized)
Needs root (or /dev/fuse access), libfuse3 (Debian: libfuse3-3) and mfusepy (PyPI).
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import faulthandler
import json
import os
import random
import re
import signal
import socket
import stat
import sys
import threading

os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")  # mfusepy would take libfuse2 first
import mfusepy as fuse  # noqa: E402

MUTATING = {
    "create", "mkdir", "mknod", "symlink", "link", "unlink", "rmdir", "rename",
    "write", "truncate", "fsync", "fsyncdir", "chmod", "chown", "utimens",
}


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "f"


class _Cut(Exception):
    """The armed operation was reached: the power is cut now."""


class CrashFS(fuse.Operations):
    use_ns = True
    # Operations on an open handle get no path (the handle is the backing fd):
    # cheaper, and right for files unlinked while open.
    flag_nopath = True
    flag_nullpath_ok = True

    def __init__(self, backing: str, model: str, ids: dict | None = None):
        self.root = os.path.realpath(backing)
        self.model = model
        self._mu = threading.Lock()
        self.frozen = threading.Event()
        self.cut_event = threading.Event()  # set (thaw): requests held by this cut fail
        self.ready = threading.Event()
        self.cut_at = ""            # which operation the cut happened at
        self.snapshot = None        # live tree at the cut (models lazy, torn, kill)
        self.arm_spec = None        # {"when", "op", "path", "data", "nth"}
        self.arm_seen = 0
        self.ops = 0                # mutating operations so far
        self.counts: dict[str, int] = {}
        self.fh_path: dict[int, str] = {}   # open file handle (backing fd) -> path at open
        self.dirs: dict[int, str] = {}      # open folder handle -> path
        self.next_dir_fh = 1 << 20
        # The node ids: backing st_ino -> node id, and the durable image by node id.
        self.nid_of: dict[int, int] = {}
        self.next_nid = 2
        self.dkind: dict[int, str] = {}     # "f", "d", "l"
        self.ddata: dict[int, bytes] = {}   # file bytes, or a symlink's target (bytes)
        self.dmeta: dict[int, tuple] = {}   # (mode bits, mtime_ns)
        self.dents: dict[int, dict] = {}    # folder -> {name: node id}
        self._load(ids or {})

    # ---- the image -------------------------------------------------------------
    def _load(self, ids: dict) -> None:
        """Everything in the backing folder at mount is durable (it is what the disk
        held at 'boot'); node ids come from the materialized folder's id file."""
        known = ids.get("paths", {})
        self.next_nid = max(int(ids.get("next", 2)), 2)
        st = os.lstat(self.root)
        self.nid_of[st.st_ino] = 1
        self._adopt(1, st, "")
        for folder, subdirs, files in os.walk(self.root):
            rel_folder = os.path.relpath(folder, self.root)
            rel_folder = "" if rel_folder == "." else rel_folder
            parent = self.nid_of[os.lstat(folder).st_ino]
            for name in subdirs + files:
                rel = os.path.join(rel_folder, name)
                cst = os.lstat(os.path.join(folder, name))
                if cst.st_ino not in self.nid_of:
                    nid = known.get(rel)
                    if nid is None:
                        nid = self.next_nid
                        self.next_nid += 1
                    self.nid_of[cst.st_ino] = nid
                    self._adopt(nid, cst, os.path.join(folder, name))
                self.dents[parent][name] = self.nid_of[cst.st_ino]
        self.next_nid = max(self.next_nid, max(self.nid_of.values()) + 1)

    def _adopt(self, nid: int, st: os.stat_result, full: str) -> None:
        kind = _kind(st.st_mode)
        self.dkind[nid] = kind
        self.dmeta[nid] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns)
        if kind == "d":
            self.dents.setdefault(nid, {})
        elif kind == "l":
            self.ddata[nid] = os.fsencode(os.readlink(full)) if full else b""
        else:
            with open(full, "rb") as f:
                self.ddata[nid] = f.read()

    def _new_node(self, st: os.stat_result, full: str) -> int:
        """A new inode (create, mkdir, symlink): a fresh node id whatever inode number
        the backing folder reused; durably empty until synced."""
        nid = self.next_nid
        self.next_nid += 1
        self.nid_of[st.st_ino] = nid
        kind = _kind(st.st_mode)
        self.dkind[nid] = kind
        self.dmeta[nid] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns)
        if kind == "d":
            self.dents[nid] = {}
        elif kind == "l":
            self.ddata[nid] = os.fsencode(os.readlink(full))  # a symlink is whole when it exists
        else:
            self.ddata[nid] = b""
        return nid

    def _nid(self, st: os.stat_result) -> int:
        nid = self.nid_of.get(st.st_ino)
        if nid is None:  # not made through this mount (should not happen): adopt as new
            nid = self.next_nid
            self.next_nid += 1
            self.nid_of[st.st_ino] = nid
            self.dkind[nid] = _kind(st.st_mode)
            self.dmeta[nid] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            self.ddata.setdefault(nid, b"")
            if stat.S_ISDIR(st.st_mode):
                self.dents.setdefault(nid, {})
        return nid

    def _sync_file(self, fd: int) -> None:
        st = os.fstat(fd)
        nid = self._nid(st)
        chunks, off = [], 0
        while True:
            chunk = os.pread(fd, 1 << 20, off)
            if not chunk:
                break
            chunks.append(chunk)
            off += len(chunk)
        self.ddata[nid] = b"".join(chunks)
        self.dmeta[nid] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns)

    def _sync_dir(self, full: str) -> None:
        nid = self._nid(os.lstat(full))
        entries = {}
        for name in os.listdir(full):
            child = os.path.join(full, name)
            cst = os.lstat(child)
            cnid = self._nid(cst)
            entries[name] = cnid
            self.dmeta.setdefault(cnid, (stat.S_IMODE(cst.st_mode), cst.st_mtime_ns))
        self.dents[nid] = entries

    def _live_tree(self, with_data: bool) -> dict:
        """{node id: {name: node id}} of the live folders (and live bytes if asked)."""
        tree, data = {}, {}
        for folder, subdirs, files in os.walk(self.root):
            nid = self._nid(os.lstat(folder))
            tree[nid] = {}
            for name in subdirs + files:
                full = os.path.join(folder, name)
                cst = os.lstat(full)
                cnid = self._nid(cst)
                tree[nid][name] = cnid
                if with_data and stat.S_ISREG(cst.st_mode):
                    with open(full, "rb") as f:
                        data[cnid] = (f.read(), (stat.S_IMODE(cst.st_mode), cst.st_mtime_ns))
        return {"tree": tree, "data": data}

    def materialize(self, dest: str, ids_path: str, seed: int = 0) -> dict:
        """Writes what survives the cut into `dest` (a new folder), and the node ids of
        its paths into `ids_path` for the next mount. `seed` picks the torn prefixes."""
        rng = random.Random(seed)
        if self.model == "posix":
            tree, live = self.dents, {}
        else:
            snap = self.snapshot or self._live_tree(self.model in ("kill", "torn"))
            tree, live = snap["tree"], snap["data"]
        os.makedirs(dest)
        paths: dict[str, int] = {}
        first_path: dict[int, str] = {}
        files = 0

        def fill(nid: int, rel: str, seen: set) -> None:
            nonlocal files
            for name, cnid in sorted(tree.get(nid, {}).items()):
                crel = os.path.join(rel, name)
                full = os.path.join(dest, crel)
                kind = self.dkind.get(cnid, "f")
                mode, mtime = self.dmeta.get(cnid, (0o600, 0))
                data = self.ddata.get(cnid, b"")
                if cnid in live and self.model == "kill":
                    data, (mode, mtime) = live[cnid]
                elif cnid in live and self.model == "torn":
                    now = live[cnid][0]
                    if len(now) > len(data) and now.startswith(data):
                        data = now[:rng.randint(len(data), len(now))]
                if kind == "d":
                    if cnid in seen:  # a folder durably in two places: keep the first
                        continue
                    seen.add(cnid)
                    os.mkdir(full, mode or 0o700)
                    paths[crel] = cnid
                    fill(cnid, crel, seen)
                elif kind == "l":
                    os.symlink(os.fsdecode(data), full)
                    paths[crel] = cnid
                elif cnid in first_path:
                    os.link(os.path.join(dest, first_path[cnid]), full)
                    paths[crel] = cnid
                else:
                    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode or 0o600)
                    try:
                        os.write(fd, data)
                        os.fchmod(fd, mode)
                    finally:
                        os.close(fd)
                    if mtime:
                        os.utime(full, ns=(mtime, mtime))
                    first_path[cnid] = crel
                    paths[crel] = cnid
                    files += 1

        fill(1, "", {1})
        with open(ids_path, "w") as f:
            json.dump({"next": self.next_nid, "paths": paths}, f)
        return {"files": files, "paths": len(paths)}

    # ---- cuts ----------------------------------------------------------------------
    def _block(self) -> None:
        """A request after the cut: held until the driver has killed every process,
        then failed (EIO) so the killed requesters can finish dying."""
        self.cut_event.wait()
        raise OSError(errno.EIO, "power cut")

    def _enter(self) -> None:
        if self.frozen.is_set():
            self._block()
        self._mu.acquire()
        if self.frozen.is_set():
            self._mu.release()
            self._block()

    def _freeze(self, why: str) -> None:
        """Called with the lock held: nothing changes from here on."""
        if self.frozen.is_set():
            return
        if self.model != "posix":
            self.snapshot = self._live_tree(self.model in ("kill", "torn"))
        self.cut_at = why
        self.cut_event = threading.Event()
        self.frozen.set()

    def _check(self, when: str, op: str, path: str | None, data: bytes | None = None) -> None:
        """With the lock held: counts the operation, and cuts (raising _Cut) when the
        armed trigger says so."""
        spec = self.arm_spec
        if when == "after" and op in MUTATING:
            self.ops += 1
            self.counts[op] = self.counts.get(op, 0) + 1
        if spec is None or spec["when"] != when:
            return
        if spec["op"] == "any":
            if op not in MUTATING:
                return
        elif spec["op"] != op:
            return
        if spec.get("path") and not re.search(spec["path"], path or ""):
            return
        if spec.get("data") and (data is None or spec["data"].encode() not in data):
            return
        self.arm_seen += 1
        if self.arm_seen >= spec["nth"]:
            self._freeze(f"{when} {op} #{self.arm_seen} {path}")
            raise _Cut

    def _run(self, op: str, path: str | None, fn, data: bytes | None = None):
        self._enter()
        result = None
        try:
            self._check("before", op, path, data)
            result = fn()
            self._check("after", op, path, data)
            return result
        except _Cut:
            if op in ("create", "open", "truncate") and result in self.fh_path:
                del self.fh_path[result]  # the kernel never gets this handle: close it
                os.close(result)
        finally:
            self._mu.release()
        self._block()  # this request cut the power: it never returns normally

    def reboot(self, backing: str, ids: dict) -> None:
        """After a cut, once every process is gone and every file closed: the mount
        serves `backing` (what materialize kept) as a freshly mounted disk would.
        The same mount keeps its st_dev, as a disk keeps its device number."""
        with self._mu:
            for fd in self.fh_path:
                os.close(fd)
            self.fh_path.clear()
            self.dirs.clear()
            self.root = os.path.realpath(backing)
            self.nid_of, self.dkind, self.ddata, self.dmeta, self.dents = {}, {}, {}, {}, {}
            self._load(ids)
            self.snapshot, self.arm_spec, self.arm_seen, self.cut_at = None, None, 0, ""
            self.frozen.clear()

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _attrs(self, st: os.stat_result) -> dict:
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime",
                "st_ctime", "st_blocks", "st_blksize", "st_rdev")
        attrs = {k: getattr(st, k) for k in keys}
        attrs["st_atime"], attrs["st_mtime"], attrs["st_ctime"] = st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns
        attrs["st_ino"] = self._nid(st)
        return attrs

    # ---- operations -----------------------------------------------------------
    def init(self, path):
        self.ready.set()

    def getattr(self, path, fh=None):
        def go():
            if fh in self.fh_path:
                st = os.fstat(fh)
            else:
                st = os.lstat(self._full(self.dirs[fh] if fh in self.dirs else path))
            return self._attrs(st)
        return self._run("getattr", path, go)

    def access(self, path, amode):
        return self._run("access", path, lambda: os.lstat(self._full(path)) and 0)

    def readlink(self, path):
        return self._run("readlink", path, lambda: os.readlink(self._full(path)))

    def statfs(self, path):
        def go():
            sv = os.statvfs(self.root)
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                    "f_files", "f_flag", "f_frsize", "f_namemax")
            return {k: getattr(sv, k) for k in keys}
        return self._run("statfs", path, go)

    def opendir(self, path):
        def go():
            if not stat.S_ISDIR(os.lstat(self._full(path)).st_mode):
                raise OSError(errno.ENOTDIR, "not a folder")
            self.next_dir_fh += 1
            self.dirs[self.next_dir_fh] = path
            return self.next_dir_fh
        return self._run("opendir", path, go)

    def readdir(self, path, fh):
        def go():
            full = self._full(self.dirs.get(fh, path))
            out = [".", ".."]
            for name in os.listdir(full):
                try:
                    cst = os.lstat(os.path.join(full, name))
                except FileNotFoundError:
                    continue
                out.append((name, {"st_mode": cst.st_mode, "st_ino": self._nid(cst)}, 0))
            return out
        return self._run("readdir", path, go)

    def releasedir(self, path, fh):
        with self._mu:
            self.dirs.pop(fh, None)
        return 0

    def fsyncdir(self, path, datasync, fh):
        path = self.dirs.get(fh, path)
        return self._run("fsyncdir", path, lambda: self._sync_dir(self._full(path)))

    def mkdir(self, path, mode):
        def go():
            full = self._full(path)
            os.mkdir(full, mode)
            self._new_node(os.lstat(full), full)
        return self._run("mkdir", path, go)

    def rmdir(self, path):
        return self._run("rmdir", path, lambda: os.rmdir(self._full(path)))

    def mknod(self, path, mode, dev):
        def go():
            full = self._full(path)
            os.mknod(full, mode, dev)
            self._new_node(os.lstat(full), full)
        return self._run("mknod", path, go)

    def symlink(self, target, source):
        def go():
            full = self._full(target)
            os.symlink(source, full)
            self._new_node(os.lstat(full), full)
        return self._run("symlink", target, go)

    def link(self, target, source):
        return self._run("link", target, lambda: os.link(self._full(source), self._full(target)))

    def unlink(self, path):
        return self._run("unlink", path, lambda: os.unlink(self._full(path)))

    def rename(self, old, new, flags=0):
        def go():
            src, dst = self._full(old), self._full(new)
            if flags & 2:  # RENAME_EXCHANGE: not needed by the judge
                raise OSError(errno.EINVAL, "RENAME_EXCHANGE unsupported")
            if flags & 1 and os.path.lexists(dst):  # RENAME_NOREPLACE
                raise OSError(errno.EEXIST, "exists")
            os.rename(src, dst)
        return self._run("rename", new, go)

    def chmod(self, path, mode):
        return self._run("chmod", path, lambda: os.chmod(self._full(path), mode, follow_symlinks=False) if path else 0)

    def chown(self, path, uid, gid):
        return self._run("chown", path, lambda: os.lchown(self._full(path), uid, gid) if path else 0)

    def utimens(self, path, times=None):
        def go():
            if path is None:
                return 0
            if times is None:
                os.utime(self._full(path), follow_symlinks=False)
            else:
                os.utime(self._full(path), ns=times, follow_symlinks=False)
        return self._run("utimens", path, go)

    def truncate(self, path, length, fh=None):
        def go():
            if fh is not None and fh in self.fh_path:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._full(path), length)
        return self._run("truncate", path or self.fh_path.get(fh), go)

    @staticmethod
    def _backing_flags(flags: int) -> int:
        # Always read-write (root may), so an fsync can read what it makes durable; no
        # O_APPEND: the kernel gives each write its offset (the end, for an append).
        keep = flags & ~(os.O_ACCMODE | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOCTTY)
        return keep | os.O_RDWR | os.O_NOFOLLOW

    def open(self, path, flags):
        def go():
            fd = os.open(self._full(path), self._backing_flags(flags))
            self.fh_path[fd] = path
            return fd
        op = "truncate" if flags & os.O_TRUNC and flags & os.O_ACCMODE else "open"
        return self._run(op, path, go)

    def create(self, path, mode, flags):
        def go():
            full = self._full(path)
            existed = os.path.lexists(full)
            fd = os.open(full, self._backing_flags(flags) | os.O_CREAT | (flags & os.O_EXCL), mode)
            if not existed:
                self._new_node(os.fstat(fd), full)
            self.fh_path[fd] = path
            return fd
        return self._run("create", path, go)

    def read(self, path, size, offset, fh):
        return self._run("read", self.fh_path.get(fh), lambda: os.pread(fh, size, offset))

    def write(self, path, data, offset, fh):
        return self._run("write", self.fh_path.get(fh), lambda: os.pwrite(fh, data, offset), data)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        # Not blocked by a cut: closing changes nothing, and the killed processes'
        # files must close.
        with self._mu:
            if self.fh_path.pop(fh, None) is not None:
                os.close(fh)
        return 0

    def fsync(self, path, datasync, fh):
        return self._run("fsync", self.fh_path.get(fh), lambda: self._sync_file(fh))

    # ---- control --------------------------------------------------------------
    def command(self, cmd: dict) -> dict:
        what = cmd.get("cmd")
        if what == "ping":
            return {"ok": True, "ready": self.ready.is_set()}
        if what == "arm":
            with self._mu:
                self.arm_spec = {"when": cmd.get("when", "after"), "op": cmd["op"],
                                 "path": cmd.get("path"), "data": cmd.get("data"),
                                 "nth": int(cmd.get("nth", 1))}
                self.arm_seen = 0
            return {"ok": True}
        if what == "cut":
            with self._mu:
                self._freeze(cmd.get("why", "cut by the driver"))
            return {"ok": True, "cut_at": self.cut_at}
        if what == "wait_frozen":
            frozen = self.frozen.wait(float(cmd.get("timeout", 0)))
            return {"ok": True, "frozen": frozen, "cut_at": self.cut_at}
        if what == "stats":
            return {"ok": True, "ops": self.ops, "counts": self.counts, "frozen": self.frozen.is_set(),
                    "cut_at": self.cut_at, "armed_seen": self.arm_seen, "open": len(self.fh_path) + len(self.dirs),
                    "open_paths": sorted(map(str, list(self.fh_path.values()) + list(self.dirs.values())))[:8]}
        if what == "ls":  # the live names of a folder, read beside the mount (never blocks)
            try:
                return {"ok": True, "names": os.listdir(self._full(cmd["path"]))}
            except (FileNotFoundError, NotADirectoryError):
                return {"ok": True, "names": []}
        if what == "thaw":
            self.cut_event.set()
            return {"ok": True}
        if what == "reboot":
            ids = {}
            if cmd.get("ids"):
                with open(cmd["ids"]) as f:
                    ids = json.load(f)
            self.reboot(cmd["backing"], ids)
            return {"ok": True}
        if what == "materialize":
            if not self.frozen.is_set():
                with self._mu:
                    self._freeze("materialize without a cut")
            return {"ok": True, **self.materialize(cmd["dest"], cmd["ids"], int(cmd.get("seed", 0)))}
        return {"ok": False, "error": f"unknown command {what!r}"}


def serve_control(fs: CrashFS, sock_path: str) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(8)

    def handle(conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream:
            for line in stream:
                try:
                    reply = fs.command(json.loads(line))
                except Exception as exc:  # a test tool: report, keep serving
                    reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                stream.write(json.dumps(reply).encode() + b"\n")
                stream.flush()

    def loop() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()


class _FUSE(fuse.FUSE):
    """mfusepy with the few fuse-3 arguments it drops passed on: rename's flags and
    the handle of a truncate (ftruncate of a file unlinked while open)."""

    def rename_fuse_3(self, old, new, flags):
        return self.operations.rename(old.decode(self.encoding, self.errors),
                                      new.decode(self.encoding, self.errors), flags)

    def truncate_fuse_3(self, path, length, fip):
        fh = fip.contents.fh if fip else None
        return self.operations.truncate(None if path is None else path.decode(self.encoding, self.errors),
                                        length, fh)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    ap.add_argument("--control", required=True, help="Unix socket for the driver")
    ap.add_argument("--model", choices=("posix", "lazy", "torn", "kill"), default="posix")
    ap.add_argument("--ids", help="node ids written by an earlier materialize")
    args = ap.parse_args(argv)
    _die_with_parent()
    faulthandler.register(signal.SIGUSR1)  # every thread's stack, for a stuck request
    ids = None
    if args.ids and os.path.exists(args.ids):
        with open(args.ids) as f:
            ids = json.load(f)
    fs = CrashFS(args.backing, args.model, ids)
    serve_control(fs, args.control)
    # Timeouts 0: every lookup and stat comes here, so nothing the kernel cached can
    # hide a cut. hard_remove: an unlinked open file is gone at once (no .fuse_hidden).
    _FUSE(fs, args.mountpoint, foreground=True, use_ino=True, hard_remove=True,
          entry_timeout=0, attr_timeout=0, negative_timeout=0, fsname="crashfs",
          subtype="crashfs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
