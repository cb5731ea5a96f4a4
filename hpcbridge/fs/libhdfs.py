"""The JNI driver of the HDFS backend: libhdfs (Apache Hadoop's C client over a JVM) via pyarrow.

``driver="libhdfs"`` moves data through :class:`pyarrow.fs.HadoopFileSystem` streams, and makes
the metadata calls pyarrow does not expose (owner, group, permission bits, replication and block
size in a stat; chmod; setrep) through the same libhdfs.so with ctypes. Both share the one JVM of
the process.

What it needs, and where it is looked for (nothing has to be exported on a machine set up by
``make test``/``make demo``; elsewhere pyarrow's documented variables are honoured):

* ``libhdfs.so``: ``$ARROW_LIBHDFS_DIR``, ``$HADOOP_HOME/lib/native``, then the copy set-up builds
  from the hdfs-sys crate's vendored Hadoop sources (``$HPCBRIDGE_CACHE/libhdfs``);
* the Hadoop client jars: ``$CLASSPATH``, else ``hadoop classpath --glob`` (``$HADOOP_HOME/bin`` or
  ``PATH``), else the jars set-up cached from Maven Central (``$HPCBRIDGE_CACHE/hadoop-*/lib``),
  with ``$HADOOP_CONF_DIR`` in front when set;
* a JVM: ``$JAVA_HOME``, else the JDK of ``java`` on PATH.

The JVM does not survive ``fork()``: its threads are gone in the child and the first call there
deadlocks (seed 003, 3.1.1). A process forked after the JVM started gets
:class:`~hpcbridge.errors.ForkSafetyError` from every libhdfs call instead of a hang. Every call runs
on the connection's fixed pool of threads, so threads attach to the JVM once and never leak.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import resource
import shutil
import subprocess
import threading
from functools import lru_cache

from ..errors import ForkSafetyError, MissingDependencyError

__all__ = ["libhdfs_location", "hadoop_classpath", "missing", "LibhdfsDriver", "jvm_started_in",
           "check_not_forked"]

#: JVM options Hadoop needs on Java 17 (reflection into the JDK); LIBHDFS_OPTS adds to them.
JVM_OPTIONS = ("--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED "
               "--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED "
               "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED "
               "-Djava.net.preferIPv4Stack=true -Xrs")
_LOG4J = "log4j.rootLogger=WARN, console\nlog4j.appender.console=org.apache.log4j.ConsoleAppender\n" \
         "log4j.appender.console.target=System.err\nlog4j.appender.console.layout=org.apache.log4j.PatternLayout\n" \
         "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n\n" \
         "log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR\n"

_LOCK = threading.Lock()
_JVM_PID: int | None = None  # the process in which this module started the JVM


def _cache() -> str:
    return os.environ.get("HPCBRIDGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hpcbridge")


def libhdfs_location() -> str | None:
    """Directory holding libhdfs.so: ``$ARROW_LIBHDFS_DIR``, ``$HADOOP_HOME/lib/native``, the set-up cache."""
    candidates = [os.environ.get("ARROW_LIBHDFS_DIR")]
    if os.environ.get("HADOOP_HOME"):
        candidates.append(os.path.join(os.environ["HADOOP_HOME"], "lib", "native"))
    candidates.append(os.path.join(_cache(), "libhdfs"))
    for directory in filter(None, candidates):
        if os.path.exists(os.path.join(directory, "libhdfs.so")):
            return directory
    return None


def _hadoop_command() -> str | None:
    if os.environ.get("HADOOP_HOME") and os.access(os.path.join(os.environ["HADOOP_HOME"], "bin", "hadoop"), os.X_OK):
        return os.path.join(os.environ["HADOOP_HOME"], "bin", "hadoop")
    return shutil.which("hadoop")


@lru_cache(maxsize=4)
def _hadoop_classpath_of(command: str) -> str | None:
    try:
        run = subprocess.run([command, "classpath", "--glob"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout.strip() or None if run.returncode == 0 else None


def hadoop_classpath() -> str | None:
    """The Hadoop client classpath (see the module docstring for the order), or None."""
    if os.environ.get("CLASSPATH"):
        return os.environ["CLASSPATH"]
    command = _hadoop_command()
    classpath = _hadoop_classpath_of(command) if command else None
    if classpath is None:
        cached = sorted(glob.glob(os.path.join(_cache(), "hadoop-*", "lib", ".complete")))
        if not cached:
            return None
        classpath = os.path.join(os.path.dirname(cached[-1]), "*")
    conf = os.environ.get("HADOOP_CONF_DIR")
    return os.pathsep.join(filter(None, [conf, classpath]))


def _java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else None


def missing() -> list[str]:
    """What the libhdfs driver lacks on this machine, each named with where it is looked for."""
    out = []
    if libhdfs_location() is None:
        out.append("libhdfs.so (set ARROW_LIBHDFS_DIR or HADOOP_HOME, or run scripts/setup.sh, which builds it "
                   "from the hdfs-sys crate into $HPCBRIDGE_CACHE/libhdfs)")
    if _java_home() is None:
        out.append("a JVM (set JAVA_HOME or put java on PATH)")
    if hadoop_classpath() is None:
        out.append("the Hadoop client jars (set CLASSPATH, HADOOP_HOME or put `hadoop` on PATH for "
                   "`hadoop classpath --glob`, or run scripts/setup.sh, which caches them)")
    if not out:  # only then is pyarrow worth importing (it is heavy)
        try:
            import pyarrow.fs  # noqa: F401
        except ImportError:
            out.append("pyarrow (pip install pyarrow)")
    return out


def jvm_started_in() -> int | None:
    """The pid of the process in which hpcbridge started the JVM (None: not started)."""
    return _JVM_PID


def check_not_forked(what: str) -> None:
    """Raise ForkSafetyError if the JVM was started by a parent of this (forked) process."""
    if _JVM_PID is not None and _JVM_PID != os.getpid():
        raise ForkSafetyError(
            f"{what}: driver='libhdfs' cannot run in a process forked (pid {os.getpid()}) after its parent "
            f"(pid {_JVM_PID}) started the JVM: the JVM's threads do not survive fork() and its calls would "
            "deadlock. Start workers with the 'spawn' or 'forkserver' method, fork before the first HDFS call, "
            "or use driver='native' in the child")


#: -Xss when the stack limit is unlimited or huge (also every Java thread's reservation).
_MAX_STACK = 64 << 20


def _stack_option() -> str:
    """``-Xss`` as large as the process's main-thread stack may grow (``ulimit -s``).

    HotSpot takes the primordial thread's stack to be -Xss long (default 1 MiB) and puts its
    guard pages there once that thread calls into the JVM, so the main thread could no longer
    grow past 1 MiB: native code with big frames then died with SIGSEGV (h5py's LZF filter has
    a 1 MiB hash table on the stack; seen in the test suite, core dump: the fault 1 MiB below
    the stack top, right under the JVM's guard pages).
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    size = _MAX_STACK if soft == resource.RLIM_INFINITY or soft > _MAX_STACK else soft
    return f"-Xss{max(size, 1 << 20) >> 10}k"


def _start_environment() -> dict[str, str]:
    """Variables libhdfs reads when it creates the JVM (only those the user did not set)."""
    env = {"ARROW_LIBHDFS_DIR": libhdfs_location() or "", "CLASSPATH": hadoop_classpath() or ""}
    java_home = _java_home()
    if java_home:
        env["JAVA_HOME"] = java_home
    log4j = os.path.join(_cache(), "libhdfs", "log4j-client.properties")
    try:
        if not os.path.exists(log4j):
            os.makedirs(os.path.dirname(log4j), exist_ok=True)
            with open(log4j, "w") as out:
                out.write(_LOG4J)
        quiet = f" -Dlog4j.configuration=file:{log4j}"
    except OSError:
        quiet = ""
    env["LIBHDFS_OPTS"] = (JVM_OPTIONS + quiet + " " + _stack_option() + " "
                           + os.environ.get("LIBHDFS_OPTS", "")).strip()
    return {k: v for k, v in env.items() if v and (k == "LIBHDFS_OPTS" or not os.environ.get(k))}


class _Environment:
    """Sets the start variables for the duration of a call that may create the JVM."""

    def __enter__(self):
        _LOCK.acquire()
        self.saved = {}
        if _JVM_PID is None:
            for key, value in _start_environment().items():
                self.saved[key] = os.environ.get(key)
                os.environ[key] = value
        return self

    def __exit__(self, *exc):
        global _JVM_PID
        try:
            if exc[0] is None and _JVM_PID is None:
                _JVM_PID = os.getpid()
            for key, value in self.saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        finally:
            _LOCK.release()


class _FileInfo(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("name", ctypes.c_char_p), ("last_mod", ctypes.c_long),
                ("size", ctypes.c_int64), ("replication", ctypes.c_short), ("block_size", ctypes.c_int64),
                ("owner", ctypes.c_char_p), ("group", ctypes.c_char_p), ("permissions", ctypes.c_short),
                ("last_access", ctypes.c_long)]


@lru_cache(maxsize=1)
def _lib(directory: str):
    lib = ctypes.CDLL(os.path.join(directory, "libhdfs.so"), use_errno=True)
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    info = ctypes.POINTER(_FileInfo)
    for name, res, args in [
        ("hdfsNewBuilder", vp, []), ("hdfsBuilderSetNameNode", None, [vp, cp]),
        ("hdfsBuilderSetNameNodePort", None, [vp, ctypes.c_uint16]), ("hdfsBuilderSetUserName", None, [vp, cp]),
        ("hdfsBuilderConfSetStr", ctypes.c_int, [vp, cp, cp]), ("hdfsBuilderConnect", vp, [vp]),
        ("hdfsGetPathInfo", info, [vp, cp]), ("hdfsListDirectory", info, [vp, cp, ctypes.POINTER(ctypes.c_int)]),
        ("hdfsFreeFileInfo", None, [info, ctypes.c_int]), ("hdfsChmod", ctypes.c_int, [vp, cp, ctypes.c_short]),
        ("hdfsSetReplication", ctypes.c_int, [vp, cp, ctypes.c_int16]),
        ("hdfsCreateDirectory", ctypes.c_int, [vp, cp]), ("hdfsDelete", ctypes.c_int, [vp, cp, ctypes.c_int]),
        ("hdfsRename", ctypes.c_int, [vp, cp, cp]), ("hdfsDisconnect", ctypes.c_int, [vp]),
        ("hdfsGetLastExceptionRootCause", cp, []),
        ("hdfsStreamBuilderAlloc", vp, [vp, cp, ctypes.c_int]), ("hdfsStreamBuilderFree", None, [vp]),
        ("hdfsStreamBuilderSetReplication", ctypes.c_int, [vp, ctypes.c_int16]),
        ("hdfsStreamBuilderSetDefaultBlockSize", ctypes.c_int, [vp, ctypes.c_int64]),
        ("hdfsStreamBuilderBuild", vp, [vp]), ("hdfsWrite", ctypes.c_int32, [vp, vp, vp, ctypes.c_int32]),
        ("hdfsHSync", ctypes.c_int, [vp, vp]), ("hdfsHFlush", ctypes.c_int, [vp, vp]),
        ("hdfsCloseFile", ctypes.c_int, [vp, vp]),
        ("hdfsPread", ctypes.c_int32, [vp, vp, ctypes.c_int64, vp, ctypes.c_int32]),
    ]:
        function = getattr(lib, name)
        function.restype, function.argtypes = res, args
    return lib


def _java(path: str) -> bytes:
    """``path`` in Java's "modified UTF-8", what libhdfs passes to ``NewStringUTF``: a character
    above U+FFFF (an emoji, U+1F600) as its two UTF-16 surrogates, 3 bytes each (standard
    UTF-8's 4-byte form named another file)."""
    if path.isascii() or max(map(ord, path)) < 0x10000:
        return path.encode()
    return "".join(c if ord(c) < 0x10000 else chr(0xD800 + ((ord(c) - 0x10000) >> 10))
                   + chr(0xDC00 + ((ord(c) - 0x10000) & 0x3FF)) for c in path).encode("utf-8", "surrogatepass")


def _from_java(name: bytes) -> str:
    """A name libhdfs returns (modified UTF-8) as a str; surrogate pairs joined."""
    text = name.decode("utf-8", "surrogatepass")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    return text


class Status:
    """One libhdfs hdfsFileInfo with hdfs-native's FileStatus field names."""

    __slots__ = ("path", "length", "isdir", "permission", "owner", "group", "modification_time", "replication",
                 "blocksize")

    def __init__(self, info: _FileInfo):
        self.path = _from_java(info.name)
        if "://" in self.path:  # libhdfs names entries with full URIs
            self.path = "/" + self.path.split("://", 1)[1].split("/", 1)[-1]
        self.isdir = info.kind == ord("D")
        self.length = 0 if self.isdir else info.size
        self.permission = info.permissions & 0o7777
        self.owner = (info.owner or b"").decode()
        self.group = (info.group or b"").decode()
        self.modification_time = info.last_mod * 1000
        self.replication = info.replication
        self.blocksize = info.block_size


#: Java exceptions libhdfs reports as EINTERNAL (255) or EIO, by the errno they mean.
_CAUSES = (("PathIsNotEmptyDirectoryException", errno.ENOTEMPTY), ("Directory is not empty", errno.ENOTEMPTY),
           ("Path is not a file", errno.EISDIR), ("ConnectException", errno.ECONNREFUSED),
           ("NoRouteToHostException", errno.EHOSTUNREACH), ("FileNotFoundException", errno.ENOENT),
           ("FileAlreadyExistsException", errno.EEXIST), ("AccessControlException", errno.EACCES),
           ("ParentNotDirectoryException", errno.ENOTDIR), ("AlreadyBeingCreatedException", errno.EBUSY),
           ("RecoveryInProgressException", errno.EBUSY), ("LeaseExpiredException", errno.EBUSY),
           ("current lease holder", errno.EBUSY))
_BUILTIN = {errno.ENOENT: FileNotFoundError, errno.EEXIST: FileExistsError, errno.EACCES: PermissionError,
            errno.ENOTDIR: NotADirectoryError, errno.EISDIR: IsADirectoryError}


def _root_cause() -> str:
    """The root cause of this thread's last libhdfs exception ('' if none is known)."""
    directory = libhdfs_location()
    try:
        cause = _lib(directory).hdfsGetLastExceptionRootCause() if directory else None
    except (OSError, AttributeError):
        return ""
    return (cause or b"").decode(errors="replace").strip().splitlines()[0] if cause else ""


def _error(path: str, what: str, code: int | None = None) -> OSError:
    """The error of the libhdfs call that just failed on this thread, with Java's root cause."""
    code = code or ctypes.get_errno() or errno.EIO
    cause = _root_cause()
    if cause and code in (255, errno.EIO, errno.ENOENT, errno.EINVAL):
        for name, mapped in _CAUSES:
            if name in cause:
                code = mapped
                break
    if code == 255:
        code = errno.EIO
    if code == errno.EACCES and cause.endswith("(is not a directory)"):
        code = errno.ENOENT  # a path through a file (/file/x): missing, as hdfs.py's RPC path says
    if not cause and code == errno.ENOENT:
        cause = f"File does not exist: {path}"
    message = f"{cause or os.strerror(code)} ({what})"
    if code == errno.EISDIR and "Path is not a file" in cause:
        return FileNotFoundError(f"Path is not a file: {path}")  # hdfs-native's form, translated to EISDIR
    if code in _BUILTIN:
        return _BUILTIN[code](message)
    return OSError(code, message, path)


def _pyarrow_call(path: str, what: str, function, *args):
    """A pyarrow call on libhdfs, its error re-read from libhdfs (pyarrow keeps only the errno)."""
    try:
        return function(*args)
    except OSError as exc:
        raise _error(path, what, exc.errno) from None


class _Reader:
    """A pyarrow HDFS input stream seen as hdfs-native's FileReader (tell, seek, read, len)."""

    def __init__(self, stream, size: int):
        self._stream = stream
        self._size = size  # from the open's stat: pyarrow's stream.size() would ask the NameNode again

    def __len__(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._stream.tell()

    def seek(self, offset: int) -> None:
        self._stream.seek(offset)

    def read(self, size: int) -> bytes:
        return self._stream.read(size)

    def readinto(self, view) -> int:
        return self._stream.readinto(view)

    def close(self) -> None:
        self._stream.close()


class _PositionalReader:
    """A libhdfs input stream (C API by ctypes, ``hdfsPread``) seen as hdfs-native's FileReader:
    for paths pyarrow cannot name (it passes standard UTF-8, libhdfs takes modified UTF-8)."""

    _STEP = 1 << 30  # hdfsPread takes an int32 length

    def __init__(self, lib, fs, handle, path: str, size: int):
        self._lib, self._fs, self._handle, self._path, self._size = lib, fs, handle, path, size
        self._pos = 0

    def __len__(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int) -> None:
        self._pos = offset

    def read(self, size: int) -> bytes:
        buffer = bytearray(max(0, min(size, self._size - self._pos)))
        return bytes(buffer[:self.readinto(buffer)])

    def readinto(self, view) -> int:
        view = memoryview(view).cast("B")
        done = 0
        if len(view):
            address = ctypes.addressof((ctypes.c_char * len(view)).from_buffer(view))
            while done < len(view):
                got = self._lib.hdfsPread(self._fs, self._handle, self._pos + done, address + done,
                                          min(self._STEP, len(view) - done))
                if got < 0:
                    raise _error(self._path, "read")
                if got == 0:
                    break
                done += got
        self._pos += done
        return done

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle:
            self._lib.hdfsCloseFile(self._fs, handle)


class _Writer:
    """A libhdfs output stream (C API by ctypes) seen as hdfs-native's FileWriter.

    Not pyarrow's: its flush() is libhdfs's hdfsFlush, i.e. Java's OutputStream.flush, which on an
    HDFS stream does not send the client's last packet; hsync here is hdfsHSync. Buffers are
    passed without a copy (the foreign call releases the GIL).
    """

    takes_views = True
    _STEP = 1 << 30  # hdfsWrite takes an int32 length

    def __init__(self, lib, fs, handle, path: str):
        self._lib, self._fs, self._handle, self._path = lib, fs, handle, path

    def write(self, data) -> int:
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        total = len(view)
        keep = None
        if isinstance(view, memoryview):
            if view.readonly:
                view = keep = bytes(view)
            else:
                keep = (ctypes.c_char * total).from_buffer(view) if total else None
        done = 0
        while done < total:
            n = min(self._STEP, total - done)
            address = (ctypes.cast(ctypes.c_char_p(view), ctypes.c_void_p).value if isinstance(view, bytes)
                       else ctypes.addressof(keep))
            wrote = self._lib.hdfsWrite(self._fs, self._handle, address + done, n)
            if wrote < 0:
                raise _error(self._path, "write")
            done += wrote
        del keep
        return total

    def hsync(self) -> None:
        if self._lib.hdfsHSync(self._fs, self._handle):
            raise _error(self._path, "hsync")

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle and self._lib.hdfsCloseFile(self._fs, handle):
            raise _error(self._path, "close")


class LibhdfsDriver:
    """The calls :class:`~hpcbridge.fs.hdfs.HdfsFileSystem` makes, served by libhdfs.

    Data streams: pyarrow ``HadoopFileSystem`` (one per replication/block-size pair, all on the same
    Java client); metadata: libhdfs's C API by ctypes (pyarrow reports no owner, mode or replication).
    """

    #: The Java client bounds every block read by its socket timeout (``dfs.client.socket-timeout``,
    #: 60 s) and moves to another replica or fails, so reads may run on the caller's thread instead
    #: of the call pool. Measured (dfsio, 2 processes x 128 MiB, read(1 MiB)): 0.60x raw pyarrow
    #: through the pool, 0.87x on the caller's thread; the hop costs most when both cores are busy.
    reads_bounded = True

    def __init__(self, host: str, port: int, user: str | None, config: dict[str, str] | None = None):
        lacking = missing()
        if lacking:
            raise MissingDependencyError(f"driver='libhdfs' for hdfs://{host}:{port} needs {', '.join(lacking)}; "
                                         "use driver='native' (hdfs-native)")
        check_not_forked(f"connect to hdfs://{host}:{port}")
        from pyarrow import fs as pafs

        self._pafs = pafs
        self.host, self.port, self.user = host, port, user
        self.config = dict(config or {})
        self._streams: dict[tuple[int, int], object] = {}
        self._streams_lock = threading.Lock()
        self._directory = libhdfs_location()
        with _Environment():
            self._lib = _lib(self._directory)
            self._fs = self._connect()
            self._stream_fs(0, 0)
        self._pid = os.getpid()

    def _connect(self):
        lib = self._lib
        builder = lib.hdfsNewBuilder()
        keep = [self.host.encode(), (self.user or "").encode()]
        lib.hdfsBuilderSetNameNode(builder, keep[0])
        lib.hdfsBuilderSetNameNodePort(builder, self.port)
        if self.user:
            lib.hdfsBuilderSetUserName(builder, keep[1])
        for key, value in self.config.items():
            keep += [str(key).encode(), str(value).encode()]
            lib.hdfsBuilderConfSetStr(builder, keep[-2], keep[-1])
        handle = lib.hdfsBuilderConnect(builder)
        if not handle:
            raise _error(f"hdfs://{self.host}:{self.port}/", "connect")
        return handle

    def _stream_fs(self, replication: int | None, block_size: int | None):
        key = (replication or 0, block_size or 0)
        fs = self._streams.get(key)
        if fs is None:
            with self._streams_lock:
                fs = self._streams.get(key)
                if fs is None:
                    fs = self._pafs.HadoopFileSystem(self.host, self.port, user=self.user, replication=key[0],
                                                     default_block_size=key[1], extra_conf=self.config)
                    self._streams[key] = fs
        return fs

    def _check(self, what: str) -> None:
        if self._pid != os.getpid():
            check_not_forked(what)

    # -- metadata (libhdfs C API) --------------------------------------------------------------
    def get_file_info(self, path: str) -> Status:
        """Stat ``path`` (hdfsGetPathInfo)."""
        self._check(f"stat {path}")
        if ":" in path:
            # A name HDFS cannot hold: Java refuses it before asking (IllegalArgumentException, EINVAL,
            # with a stack trace on stderr); the NameNode (the native driver, WebHDFS) calls it missing.
            raise FileNotFoundError(f"File does not exist: {path} (HDFS names have no ':')")
        info = self._lib.hdfsGetPathInfo(self._fs, _java(path))
        if not info:
            raise _error(path, "stat")
        try:
            return Status(info.contents)
        finally:
            self._lib.hdfsFreeFileInfo(info, 1)

    def list_status(self, path: str, recursive: bool = False):
        """The entries of directory ``path`` (hdfsListDirectory); an empty directory gives none."""
        self._check(f"list {path}")
        count = ctypes.c_int(0)
        ctypes.set_errno(0)
        entries = self._lib.hdfsListDirectory(self._fs, _java(path), ctypes.byref(count))
        if not entries:
            if ctypes.get_errno():
                raise _error(path, "list")
            return iter(())
        try:
            statuses = [Status(entries[i]) for i in range(count.value)]
        finally:
            self._lib.hdfsFreeFileInfo(entries, count.value)
        return iter(statuses)

    def mkdirs(self, path: str, permission: int = 0o755, create_parent: bool = False) -> None:
        """Make directory ``path``; its parent must exist unless ``create_parent`` (POSIX mkdir)."""
        self._check(f"mkdir {path}")
        if not create_parent:  # Java's mkdirs always creates parents; POSIX mkdir does not
            self._require_parent(path, "Parent path is not a directory", "Parent directory doesn't exist")
        if self._lib.hdfsCreateDirectory(self._fs, _java(path)):
            raise _error(path, "mkdir")

    def delete(self, path: str, recursive: bool = False) -> bool:
        """Remove ``path`` (a non-empty directory only if ``recursive``: ENOTEMPTY otherwise)."""
        self._check(f"delete {path}")
        if self._lib.hdfsDelete(self._fs, _java(path), int(recursive)):
            raise _error(path, "delete")
        return True

    def rename(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Rename ``src`` to ``dst`` (hdfsRename); a missing destination parent is named."""
        self._check(f"rename {src}")
        if self._lib.hdfsRename(self._fs, _java(src), _java(dst)):
            error = _error(src, "rename")
            self._require_parent(dst, "rename destination's parent is not a directory",
                                 "rename destination's parent does not exist")
            raise error

    def _require_parent(self, path: str, not_a_directory: str, missing: str) -> None:
        """Raise NotADirectoryError / FileNotFoundError (``message: parent``) unless the parent
        directory of ``path`` exists."""
        parent = path.rstrip("/").rsplit("/", 1)[0] or "/"
        try:
            if not self.get_file_info(parent).isdir:
                raise NotADirectoryError(f"{not_a_directory}: {parent}")
        except FileNotFoundError:
            raise FileNotFoundError(f"{missing}: {parent}") from None

    def set_permission(self, path: str, permission: int) -> None:
        """chmod (hdfsChmod)."""
        self._check(f"chmod {path}")
        if self._lib.hdfsChmod(self._fs, _java(path), permission):
            raise _error(path, "chmod")

    def set_replication(self, path: str, replication: int) -> None:
        """setrep (hdfsSetReplication)."""
        self._check(f"setrep {path}")
        if self._lib.hdfsSetReplication(self._fs, _java(path), replication):
            raise _error(path, "setrep")

    # -- data (pyarrow streams) ----------------------------------------------------------------
    def read(self, path: str) -> _Reader:
        """Open ``path`` for reading (a pyarrow input stream)."""
        self._check(f"open {path}")
        # Stat first: libhdfs prints a Java stack trace to stderr for every open of a missing path
        # (PLFS probes optional files), but not for a stat; a directory is refused the same way.
        info = self.get_file_info(path)
        if info.isdir:
            raise FileNotFoundError(f"Path is not a file: {path}")
        # The stat's length is what pyarrow's stream.size() returns (a second getFileInfo): each
        # NameNode call is a few ms through the JVM, a tenth of reading a 128 MiB file.
        if not path.isascii() and max(map(ord, path)) >= 0x10000:
            builder = self._lib.hdfsStreamBuilderAlloc(self._fs, _java(path), os.O_RDONLY)
            handle = self._lib.hdfsStreamBuilderBuild(builder) if builder else None  # frees the builder
            if not handle:
                raise _error(path, "open")
            return _PositionalReader(self._lib, self._fs, handle, path, info.length)
        return _Reader(_pyarrow_call(path, "open", self._stream_fs(0, 0).open_input_file, path), info.length)

    def create(self, path: str, replication: int | None = None, block_size: int | None = None,
               overwrite: bool = True) -> _Writer:
        """Create ``path`` (replacing a file only if ``overwrite``; the parent must exist)."""
        self._check(f"create {path}")
        # Java's create makes missing parents and pyarrow always overwrites: POSIX refuses both.
        # An existing file proves its parent, so the parent is asked about only for a new file.
        try:
            existing = self.get_file_info(path)
        except (FileNotFoundError, NotADirectoryError):
            existing = None
        if existing is not None:
            if existing.isdir:
                raise IsADirectoryError(f"{path} already exists as a directory")
            if not overwrite:
                raise FileExistsError(f"{path} already exists")
        else:
            self._require_parent(path, "Parent path is not a directory", "Parent directory doesn't exist")
        return self._open_writer(path, os.O_WRONLY, replication, block_size)

    def append(self, path: str) -> _Writer:
        """Open ``path`` for appending (hdfsStreamBuilder with O_APPEND)."""
        self._check(f"append {path}")
        return self._open_writer(path, os.O_WRONLY | os.O_APPEND, None, None)

    def _open_writer(self, path: str, flags: int, replication: int | None, block_size: int | None) -> _Writer:
        lib = self._lib
        builder = lib.hdfsStreamBuilderAlloc(self._fs, _java(path), flags)
        if not builder:
            raise _error(path, "create" if flags == os.O_WRONLY else "append")
        if replication:
            lib.hdfsStreamBuilderSetReplication(builder, replication)
        if block_size:
            lib.hdfsStreamBuilderSetDefaultBlockSize(builder, block_size)
        handle = lib.hdfsStreamBuilderBuild(builder)  # frees the builder
        if not handle:
            raise _error(path, "create" if flags == os.O_WRONLY else "append")
        return _Writer(lib, self._fs, handle, path)
