"""Describe an HDF5 dataset on any hpcbridge backend and read regions of it from raw bytes.

:func:`describe` opens the file through an hpcbridge file object with a block cache
(:class:`~hpcbridge.hdf5.cache.BlockCacheFile`), asks h5py for the dataset's shape, type,
filters and fill value, parses its data layout message, and indexes its chunks
(:mod:`~hpcbridge.hdf5.btree`). The result is cached per file version (size and mtime).

:func:`read_region` fills a numpy array with a hyperslab of the dataset from an open hpcbridge
file, without h5py: contiguous data with one read per contiguous run straight into the output,
chunks with one read per run of adjacent chunks, decoded by :mod:`~hpcbridge.hdf5.filters`.
It returns the byte ranges it read, for the locality report.
"""

from __future__ import annotations

import logging
import math
import posixpath
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..errors import MissingDependencyError
from .btree import ChunkIndex, agrees_with_hdf5, read_btree_index, read_index_h5py, read_v4_index
from .cache import BlockCacheFile
from .errors import DatasetNotFoundError, HDF5Error, HDF5FormatError, NotHDF5Error
from .filters import Filter, check_pipeline, decode
from .layout import CHUNKED, COMPACT, CONTIGUOUS, read_layout, read_superblock

__all__ = ["DatasetInfo", "describe", "read_region", "chunk_ranges", "contiguous_runs", "open_cached", "require_h5py"]

#: Coalesce adjacent stored chunks into reads of at most this many bytes.
MAX_RUN = 64 << 20
_CACHE: OrderedDict = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 64
log = logging.getLogger(__name__)
#: Datasets whose stored type HDF5 converts on read (space-padded strings, integers of a few
#: bits...) are read through h5py when describing them, up to this many bytes.
CONVERTED_MAX = 64 << 20


@dataclass(frozen=True)
class DatasetInfo:
    """What a reader needs to know about one dataset (no chunk index: see :func:`describe`).

    Attributes
    ----------
    url, name:
        The file's URL and the dataset's path in it.
    shape, dtype:
        As h5py reports them (``dtype`` in the file's byte order).
    layout:
        ``"contiguous"``, ``"chunked"`` or ``"compact"``.
    chunk:
        The chunk shape (chunked datasets).
    address:
        Absolute address of contiguous data (None: not allocated, all fill value).
    filters:
        The filter pipeline, in write order.
    fill:
        What unwritten elements read as, as h5py reads them: the fill value, zero where the
        fill time is "never"; for an HDF5 array type the whole fill array (its last axes).
    unfiltered_edges:
        Partial edge chunks are stored unfiltered (``H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS``).
    values:
        The data of a compact or scalar dataset (read with h5py while describing it).
    nul_terminated:
        ``(offset, size)`` in bytes, within one element, of every fixed-length string stored
        NUL-terminated (``H5T_STR_NULLTERM``): HDF5 reads such a string up to its first NUL and
        pads the rest with NULs, whatever bytes the file holds after it.
    """

    url: str
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    layout: str
    chunk: tuple[int, ...] | None = None
    address: int | None = None
    filters: tuple[Filter, ...] = ()
    fill: object = 0
    values: np.ndarray | None = None
    unfiltered_edges: bool = False
    nul_terminated: tuple[tuple[int, int], ...] = ()

    @property
    def nbytes(self) -> int:
        """Bytes of the whole dataset in memory."""
        return math.prod(self.shape) * self.dtype.itemsize


def open_cached(fs, path: str, size: int | None = None) -> BlockCacheFile:
    """``path`` of ``fs`` opened for reading behind a block cache."""
    if size is None:
        size = fs.info(path).size
    return BlockCacheFile(fs.open(path, "rb", buffering=0), size, fs.url(path))


def require_h5py(url: str):
    """The h5py module, or MissingDependencyError naming the file it was needed for."""
    try:
        import h5py
    except ImportError:
        raise MissingDependencyError(f"reading the HDF5 file {url} needs h5py: pip install 'hpcbridge[hdf5]'") \
            from None
    return h5py


def _object_address(h5py, dsid) -> int:
    info = h5py.h5o.get_info(dsid)
    addr = getattr(info, "addr", None)
    if addr is not None:
        return int(addr)
    token = getattr(info, "token", None)  # HDF5 >= 1.12: the native VOL token starts with the address
    if token is None:
        raise HDF5Error("h5py reports no object address (HDF5 build not supported)")
    return int.from_bytes(bytes(token)[:8], "little")


def _fill_value(h5py, obj, plist, dataset: str, url: str):
    """What an unwritten element of ``obj`` reads as through h5py.

    Where the fill time is "never", HDF5 leaves unwritten data alone and h5py's zeroed buffer
    shows through: zeros. An HDF5 array type's fill is an array (h5py's ``fillvalue`` cannot
    convert it): read from an unwritten dataset of the same type and creation properties in a
    memory file, as h5py would read it.
    """
    dtype = obj.dtype
    if plist.get_fill_time() == h5py.h5d.FILL_TIME_NEVER:
        return np.zeros((), dtype.base)[()] if not dtype.shape else np.zeros(dtype.shape, dtype.base)
    if not dtype.shape:
        return obj.fillvalue
    try:
        with h5py.File(f"fill-{id(obj)}", "w", driver="core", backing_store=False) as probe:
            dims = tuple(obj.chunks) if obj.chunks else (1,) * len(obj.shape)
            h5py.h5d.create(probe.id, b"fill", obj.id.get_type(), h5py.h5s.create_simple(dims), dcpl=plist)
            return np.asarray(probe["fill"][(0,) * len(dims)]).reshape(dtype.shape)
    except Exception as exc:
        raise HDF5Error(f"dataset {dataset!r} of {url}: its fill value ({dtype}) cannot be read: {exc}") from None


def _refuse_external_links(h5py, h5, dataset: str, url: str, asked: str | None = None, depth: int = 0) -> str:
    """The hard path of ``dataset`` in ``h5`` (soft links followed); HDF5Error where the path
    crosses an external link: h5py, reading through hpcbridge's file object, would resolve it in
    this same file, and the layout parsed here describes this file's bytes only."""
    asked = asked or dataset
    if depth > 16:
        raise HDF5Error(f"{asked!r} in {url}: more than 16 soft links in a row")
    current = "/"
    for part in (p for p in dataset.split("/") if p):
        path = posixpath.join(current, part)
        link = h5.get(path, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            raise HDF5Error(f"{asked!r} in {url} is reached through an external link to {link.path!r} in "
                            f"{link.filename!r} (at {path}): open that file's URL instead")
        if isinstance(link, h5py.SoftLink):
            target = link.path if link.path.startswith("/") else posixpath.join(current, link.path)
            path = _refuse_external_links(h5py, h5, posixpath.normpath(target), url, asked, depth + 1)
        current = path
    return current


def _converted_on_read(h5py, tid) -> str | None:
    """What HDF5 would convert in the file type ``tid`` when h5py reads it as its numpy dtype
    (None: the stored bytes are that dtype's bytes, as the parser reads them)."""
    t = h5py.h5t
    cls = tid.get_class()
    if cls == t.INTEGER:
        if tid.get_precision() != 8 * tid.get_size() or tid.get_offset() != 0:
            return f"{tid.get_precision()}-bit integers at bit offset {tid.get_offset()}"
    elif cls == t.FLOAT:
        order = ">" if tid.get_order() == t.ORDER_BE else "<"
        try:
            native = t.py_create(np.dtype(f"{order}f{tid.get_size()}"))
        except TypeError:
            return f"{tid.get_size()}-byte floating point"
        if not tid.equal(native):
            return f"a non-IEEE {tid.get_size()}-byte floating-point layout"
    elif cls == t.STRING:
        if tid.get_strpad() == t.STR_SPACEPAD:
            return "space-padded (Fortran) strings"
    elif cls == t.COMPOUND:
        for i in range(tid.get_nmembers()):
            why = _converted_on_read(h5py, tid.get_member_type(i))
            if why is not None:
                return why
    elif cls in (t.ARRAY, t.ENUM):
        return _converted_on_read(h5py, tid.get_super())
    return None


def _nul_terminated(h5py, tid, at: int = 0) -> list[tuple[int, int]]:
    """``(offset, size)`` of the NUL-terminated fixed-length strings in an element of the file
    type ``tid`` (members of compound and array types included; h5py's dtype keeps the file's
    member offsets). One-byte strings (NetCDF's characters) are left out: nothing follows
    their NUL."""
    t = h5py.h5t
    cls = tid.get_class()
    if cls == t.STRING:
        if not tid.is_variable_str() and tid.get_strpad() == t.STR_NULLTERM and tid.get_size() > 1:
            return [(at, tid.get_size())]
    elif cls == t.COMPOUND:
        return [span for i in range(tid.get_nmembers())
                for span in _nul_terminated(h5py, tid.get_member_type(i), at + tid.get_member_offset(i))]
    elif cls == t.ARRAY:
        base = tid.get_super()
        inner = _nul_terminated(h5py, base)
        return [(at + k * base.get_size() + o, n) for k in range(math.prod(tid.get_array_dims())) for o, n in inner]
    return []


def _names(h5) -> list[str]:
    out: list[str] = []

    def visit(name, obj):
        if hasattr(obj, "shape") and len(out) < 20:
            out.append("/" + name)

    h5.visititems(visit)
    return out


def describe(fs, path: str, dataset: str) -> tuple[DatasetInfo, ChunkIndex | None]:
    """``(info, chunk index or None)`` of ``dataset`` in file ``path`` of ``fs``, cached per
    file version (``fs.version``: size, mtime and, for local files, inode and change time).

    Raises :class:`NotHDF5Error`, :class:`DatasetNotFoundError` (naming the datasets that exist)
    or :class:`HDF5Error`, all naming the URL; FileNotFoundError for a missing file.
    """
    url = fs.url(path)
    stat = fs.info(path)
    if stat.is_dir:
        raise IsADirectoryError(f"{url} is a directory, not an HDF5 file")
    key = (fs, path, fs.version(path), dataset)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    result = _describe(fs, path, dataset, url, stat.size)
    with _CACHE_LOCK:
        _CACHE[key] = result
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return result


@contextmanager
def _metadata_errors(url: str, dataset: str):
    """h5py's errors for metadata HDF5 cannot read (RuntimeError, KeyError: a damaged heap or
    B-tree, a type with no numpy equivalent: TypeError) as HDF5FormatError naming the URL."""
    try:
        yield
    except HDF5Error:  # ours, named already (DatasetNotFoundError is a KeyError too)
        raise
    except (RuntimeError, KeyError, TypeError) as exc:
        raise HDF5FormatError(f"{url}: HDF5 cannot read the metadata of {dataset!r}: {exc}") from exc


def _inside(index: ChunkIndex, shape, chunk, url: str, dataset: str) -> ChunkIndex:
    """The chunks of a version-1 B-tree inside the dataset's shape (HDF5 never looks up the
    others: a damaged key); HDF5FormatError for a chunk not on the chunk grid."""
    if not len(index):
        return index
    if np.any(index.coords % np.array(chunk, np.int64)) or np.any(index.coords < 0):
        raise HDF5FormatError(f"{url}: the chunk B-tree of {dataset!r} has chunks off the chunk grid {chunk}")
    inside = np.all(index.coords < np.array(shape, np.int64), axis=1)
    return index if inside.all() else index.take(inside)


def _describe(fs, path: str, dataset: str, url: str, size: int):
    h5py = require_h5py(url)
    f = open_cached(fs, path, size)
    try:
        sb = read_superblock(f, url)
        try:
            h5 = h5py.File(f, "r")
        except OSError as exc:
            raise NotHDF5Error(f"{url} cannot be opened as an HDF5 file: {exc}") from None
        with h5, _metadata_errors(url, dataset):
            _refuse_external_links(h5py, h5, dataset, url)
            obj = h5.get(dataset)
            if obj is None:
                raise DatasetNotFoundError(f"no dataset {dataset!r} in {url} (datasets: "
                                           f"{', '.join(_names(h5)) or 'none'})")
            if not isinstance(obj, h5py.Dataset):
                raise DatasetNotFoundError(f"{dataset!r} in {url} is a {type(obj).__name__.lower()}, not a dataset")
            if obj.shape is None:
                raise HDF5Error(f"dataset {dataset!r} of {url} has a null dataspace (no elements; h5py reads it "
                                "as h5py.Empty): there is no array to read")
            dtype = obj.dtype
            if dtype.hasobject:
                raise HDF5Error(f"dataset {dataset!r} of {url} has variable-length or reference elements "
                                f"({dtype}); hpcbridge reads fixed-size types only")
            dsid = obj.id
            plist = dsid.get_create_plist()
            if plist.get_external_count():
                names = [plist.get_external(i)[0].decode(errors="replace") for i in range(plist.get_external_count())]
                raise HDF5Error(f"dataset {dataset!r} of {url} stores its data in external files ({', '.join(names)}); "
                                "hpcbridge reads data stored in the HDF5 file itself (read it with h5py)")
            filters = []
            for i in range(plist.get_nfilters()):
                code, flags, values, name = plist.get_filter(i)
                filters.append(Filter(int(code), int(flags), tuple(int(v) for v in values),
                                      name.decode(errors="replace") if isinstance(name, bytes) else str(name)))
            check_pipeline(filters, url, dataset)
            shape = tuple(int(n) for n in obj.shape)
            fill = _fill_value(h5py, obj, plist, dataset, url)
            # An HDF5 array type (h5py dtype ('<f4', (3,))): its dimensions are the array's last
            # axes, as numpy gives them; the bytes are the same, element by element.
            sub = dtype.shape
            if sub:
                shape, dtype = shape + sub, dtype.base
            layout = read_layout(f, _object_address(h5py, dsid) + sb.base, sb, url)
            tid = dsid.get_type()
            nul = tuple(_nul_terminated(h5py, tid.get_super() if sub else tid))
            common = dict(url=url, name=obj.name, shape=shape, dtype=dtype, filters=tuple(filters), fill=fill,
                          nul_terminated=nul)
            converted = _converted_on_read(h5py, dsid.get_type())
            if converted is not None:
                # The stored bytes are not the numpy type h5py reads them as: HDF5 converts them.
                nbytes = math.prod(shape) * dtype.itemsize
                if nbytes > CONVERTED_MAX:
                    raise HDF5Error(f"dataset {dataset!r} of {url} is stored as {converted}, which HDF5 converts "
                                    f"on read; hpcbridge reads such datasets through h5py only up to "
                                    f"{CONVERTED_MAX >> 20} MiB ({nbytes} bytes here): read it with h5py")
                values = np.asarray(obj[()]).reshape(shape)
                return DatasetInfo(layout="compact", values=values, **dict(common, dtype=values.dtype)), None
            if layout.layout_class == COMPACT or not shape:
                return DatasetInfo(layout="compact", values=np.asarray(obj[()]).reshape(shape), **common), None
            if layout.layout_class == CONTIGUOUS:
                if dsid.get_offset() is not None and layout.address != dsid.get_offset():
                    raise HDF5FormatError(f"{url}: parsed data address {layout.address} of {dataset!r} differs "
                                          f"from HDF5's {dsid.get_offset()}")
                return DatasetInfo(layout="contiguous", address=layout.address, **common), None
            if layout.layout_class == CHUNKED:
                chunk = tuple(int(c) for c in obj.chunks)
                if layout.version < 4:
                    index = ChunkIndex.empty(len(chunk)) if layout.address is None else \
                        _inside(read_btree_index(f, layout.address, len(chunk), sb.base, sb.offset_size, url),
                                shape[:len(chunk)], chunk, url, dataset)
                else:
                    grid_shape = shape[:len(chunk)]
                    index = read_v4_index(f, layout, grid_shape, tuple(obj.maxshape), chunk, obj.dtype.itemsize,
                                          sb, url)
                    if index is not None and not agrees_with_hdf5(f, dsid, index, sb.base):
                        log.warning("%s: the chunk index of %r parsed from the file disagrees with HDF5's; "
                                    "reading it through h5py instead", url, dataset)
                        index = None
                    if index is None:  # version-2 B-trees: one h5py call per chunk
                        index = read_index_h5py(dsid, grid_shape, chunk, sb.base)
                        if not agrees_with_hdf5(f, dsid, index, sb.base):
                            raise HDF5Error(f"dataset {dataset!r} of {url}: HDF5 reports chunk addresses that do "
                                            "not hold its chunks (its chunk index type "
                                            f"{layout.index_type}); read it with h5py")
                if sub:  # the array type's axes: one chunk spans them whole
                    chunk += sub
                    index.coords = np.concatenate([index.coords, np.zeros((len(index), len(sub)), np.int64)], axis=1)
                # Layout flag 0x01 (version 4): partial edge chunks skip the filters, whatever
                # their filter mask says.
                edges = layout.version >= 4 and bool(layout.flags & 1) and bool(filters)
                return DatasetInfo(layout="chunked", chunk=chunk, unfiltered_edges=edges, **common), index
            raise HDF5Error(f"dataset {dataset!r} of {url} has a virtual or unknown layout "
                            f"(class {layout.layout_class}); hpcbridge reads contiguous, chunked and compact ones")
    finally:
        f.close()


# -- reading -------------------------------------------------------------------------------
def contiguous_runs(info: DatasetInfo, region) -> tuple[np.ndarray, int]:
    """``(start offsets, run length)`` in bytes of the contiguous runs of ``region``
    (``[(start, stop)]`` per axis) of a contiguous dataset, in the region's C order."""
    shape, item = info.shape, info.dtype.itemsize
    rank = len(shape)
    k = rank
    while k > 0 and tuple(region[k - 1]) == (0, shape[k - 1]):
        k -= 1
    strides = [math.prod(shape[i + 1:]) for i in range(rank)]
    if k == 0:
        return np.array([info.address], np.int64), math.prod(shape) * item
    axis = k - 1
    run = (region[axis][1] - region[axis][0]) * strides[axis] * item
    base = info.address + region[axis][0] * strides[axis] * item
    if axis == 0:
        return np.array([base], np.int64), run
    grids = np.meshgrid(*[np.arange(region[i][0], region[i][1], dtype=np.int64) for i in range(axis)],
                        indexing="ij")
    offsets = sum(g.ravel() * (strides[i] * item) for i, g in enumerate(grids))
    return base + offsets, run


def _fill(info: DatasetInfo, region) -> object:
    """The fill of ``region``: a scalar, or the part of an array type's fill array it covers."""
    fill = info.fill
    if np.ndim(fill) == 0:
        return fill
    return fill[tuple(slice(a, b) for a, b in region[len(region) - np.ndim(fill):])]


def _read_contiguous(f, info: DatasetInfo, region, out: np.ndarray) -> list:
    if info.address is None:
        out[...] = _fill(info, region)
        return []
    starts, run = contiguous_runs(info, region)
    flat = out.reshape(-1).view(np.uint8)
    if len(starts) == 1 or run >= (64 << 10) or len(starts) <= 16:
        rows = flat.reshape(len(starts), run)
        for i, start in enumerate(starts.tolist()):
            got = f.preadinto(rows[i], start)
            if got != run:
                raise HDF5FormatError(f"{info.url}: dataset {info.name!r} ends early ({got} of {run} bytes at {start})")
        return [(int(s), run) for s in starts]
    # Many small runs: one read of the rows covering them, then a strided copy.
    first, last = region[0]
    row = math.prod(info.shape[1:]) * info.dtype.itemsize
    buf = np.empty((last - first,) + info.shape[1:], info.dtype)
    start = info.address + first * row
    got = f.preadinto(buf.reshape(-1).view(np.uint8), start)
    if got != buf.nbytes:
        raise HDF5FormatError(f"{info.url}: dataset {info.name!r} ends early ({got} of {buf.nbytes} bytes)")
    out[...] = buf[(slice(None),) + tuple(slice(a, b) for a, b in region[1:])]
    return [(start, buf.nbytes)]


def chunk_ranges(index: ChunkIndex, max_run: int = MAX_RUN) -> list[tuple[int, int, list[int]]]:
    """Adjacent stored chunks merged into reads: ``[(offset, length, [chunk positions])]``."""
    order = np.argsort(index.address, kind="stable").tolist()
    addresses, sizes = index.address.tolist(), index.size.tolist()
    runs: list[tuple[int, int, list[int]]] = []
    for i in order:
        a, n = addresses[i], sizes[i]
        if runs and runs[-1][0] + runs[-1][1] == a and runs[-1][1] + n <= max_run:
            start, length, members = runs[-1]
            members.append(i)
            runs[-1] = (start, length + n, members)
        else:
            runs.append((a, n, [i]))
    return runs


def _read_chunked(f, info: DatasetInfo, index: ChunkIndex, region, out: np.ndarray) -> list:
    chunk = info.chunk
    lo = np.array([a for a, _ in region], np.int64)
    hi = np.array([b for _, b in region], np.int64)
    shape = np.array(info.shape, np.int64)
    csize = np.array(chunk, np.int64)
    expected = math.prod(int((h - 1) // c - a // c + 1) for a, h, c in zip(lo, hi, csize)) if out.size else 0
    nbytes = math.prod(chunk) * info.dtype.itemsize
    fetched = []
    whole = (len(index) == 1 and not any(not (int(index.mask[0]) >> i & 1) for i in range(len(info.filters)))
             and np.array_equal(index.coords[0], lo) and np.array_equal(np.minimum(lo + csize, shape), hi)
             and np.array_equal(hi - lo, csize) and int(index.size[0]) == nbytes)
    if whole:  # one unfiltered chunk is the whole region: straight into the output
        got = f.preadinto(out.reshape(-1).view(np.uint8), int(index.address[0]))
        if got != nbytes:
            raise HDF5FormatError(f"{info.url}: chunk at {int(index.address[0])} of {info.name!r} is short")
        return [(int(index.address[0]), nbytes)]
    if len(index) < expected:
        out[...] = _fill(info, region)
    for start, length, members in chunk_ranges(index):
        buf = bytearray(length)
        got = f.preadinto(buf, start)
        if got != length:
            raise HDF5FormatError(f"{info.url}: chunks at {start} of {info.name!r} end early ({got} of {length} bytes)")
        fetched.append((start, length))
        view = memoryview(buf)
        at = start
        for i in members:
            n = int(index.size[i])
            data = view[at - start:at - start + n]
            at += n
            c0 = index.coords[i]
            if info.filters and not (info.unfiltered_edges and np.any(c0 + csize > shape)):
                data = decode(data, info.filters, int(index.mask[i]), info.url, info.name, int(index.address[i]))
            if len(data) < nbytes:
                raise HDF5FormatError(f"{info.url}: chunk at {int(index.address[i])} of {info.name!r} decodes to "
                                      f"{len(data)} bytes, expected {nbytes}")
            values = np.frombuffer(data, dtype=info.dtype, count=math.prod(chunk)).reshape(chunk)
            a = np.maximum(c0, lo)
            b = np.minimum(np.minimum(c0 + csize, shape), hi)
            if np.any(b <= a):
                continue
            src = tuple(slice(int(x - c), int(y - c)) for x, y, c in zip(a, b, c0))
            dst = tuple(slice(int(x - o), int(y - o)) for x, y, o in zip(a, b, lo))
            out[dst] = values[src]
    return fetched


def map_region(f, info: DatasetInfo, region) -> tuple[np.ndarray, list] | None:
    """``(array, byte ranges)`` of the hyperslab ``region`` of a contiguous dataset whose bytes
    are one run in the file, as a view of a memory map of that run (``f.map_range``: no read,
    no copy; pages come from the page cache when the array is first used).

    ``None`` where mapping does not apply -- the region is several runs, the file cannot be
    mapped, the run is not where the dataset says (past the end: :func:`read_region` names the
    error) or its address does not suit the type's alignment -- so the caller reads instead.
    """
    if info.layout != "contiguous" or info.address is None or info.dtype.hasobject or info.nul_terminated:
        return None  # (NUL-terminated strings are cleared past their NUL: not the file's bytes)
    region = [(int(a), int(b)) for a, b in region]
    shape = tuple(b - a for a, b in region)
    if math.prod(shape) == 0:
        return None
    starts, run = contiguous_runs(info, region)
    if len(starts) != 1:
        return None
    try:
        view = f.map_range(int(starts[0]), run)
    except (OSError, ValueError):  # io.UnsupportedOperation, ENODEV, past the end of the file
        return None
    out = np.frombuffer(view, info.dtype).reshape(shape)
    if not out.flags.aligned:  # numpy would copy unaligned data through a buffer at every use
        return None
    return out, [(int(starts[0]), run)]


def read_region(f, info: DatasetInfo, region, index: ChunkIndex | None = None,
                out: np.ndarray | None = None) -> tuple[np.ndarray, list]:
    """``(array, byte ranges read)``: the hyperslab ``region`` (``[(start, stop)]`` per axis) of
    the dataset, read from ``f`` (an open hpcbridge file: ``preadinto(buffer, offset)``).

    ``index`` holds (at least) the stored chunks intersecting the region (chunked datasets).
    """
    region = [(int(a), int(b)) for a, b in region]
    if out is None:
        out = np.empty(tuple(b - a for a, b in region), info.dtype)
    if out.size == 0:
        return out, []
    if info.layout == "compact":
        out[...] = info.values[tuple(slice(a, b) for a, b in region)]
        return out, []
    if info.layout == "contiguous":
        fetched = _read_contiguous(f, info, region, out)
    else:
        fetched = _read_chunked(f, info, index if index is not None else ChunkIndex.empty(len(region)), region, out)
    if info.nul_terminated:
        _clear_after_nul(out, info.nul_terminated)
    return out, fetched


def _clear_after_nul(out: np.ndarray, spans) -> None:
    """Zero the bytes after the first NUL of each NUL-terminated string of ``out``, as HDF5
    converts such strings on read (a writer may leave anything after the terminator)."""
    flat = out if out.flags.c_contiguous else np.ascontiguousarray(out)
    raw = flat.reshape(-1).view(np.uint8).reshape(flat.size, flat.dtype.itemsize)
    for at, n in spans:
        strings = raw[:, at:at + n]
        strings[np.logical_or.accumulate(strings == 0, axis=1)] = 0
    if flat is not out:
        out[...] = flat
