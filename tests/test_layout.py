"""Layout discovery: mountinfo, the Lustre/OrangeFS/CephFS parsers on recorded values, local files."""

import os
import re
import shutil
import socket
import subprocess

import pytest

import hpcbridge
from hpcbridge.fs.layout import chunked_blocks, posix_block_locations
from hpcbridge.fs.layout import cephfs, lustre, orangefs
from hpcbridge.fs.layout.mountinfo import Mount, find_mount, parse_mountinfo

from .fixtures import layouts as rec

MiB = 1 << 20


def reader(values):
    return lambda name: values.get(name)


def test_mountinfo_parsing_and_escapes():
    mounts = parse_mountinfo(rec.MOUNTINFO)
    assert [m.fstype for m in mounts] == ["ext4", "pvfs2", "lustre", "ceph", "gpfs", "nfs4"]
    assert mounts[3].mount_point == "/mnt/ceph fs"
    assert mounts[2].source == "10.0.0.10@tcp:/lfs01"
    assert find_mount("/mnt/ceph fs/x", mounts).fstype == "ceph"
    assert find_mount("/lustre/lfs01x/y", mounts).fstype == "ext4"  # a prefix is not a parent
    assert find_mount("/scratch/a/b", mounts).fstype == "nfs4"


#: Lines as the kernel writes them for names holding the characters it escapes in every field
#: it prints as a string (seq_escape: space, tab, newline, backslash), fstype included.
ESCAPED_MOUNTINFO = "\n".join([
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw",
    "140 22 0:70 / /mnt/my\\040dir rw,nosuid shared:90 - fuse.my\\040fs my\\134src\\011x rw,user_id=0",
    "141 22 0:71 / /mnt/t\\011ab rw - fuse.a\\134b\\012c\\011d src\\040one\\012two rw",
    "",
])


def test_mountinfo_fstype_and_source_are_unescaped_as_findmnt_does(tmp_path):
    """The fstype was kept escaped ("fuse.my\\040fs"), unlike the mount point and source.
    Oracle: util-linux findmnt reading the same text (--tab-file)."""
    import json

    mounts = parse_mountinfo(ESCAPED_MOUNTINFO)
    got = [(m.mount_point, m.fstype, m.source) for m in mounts]
    assert got[1:] == [("/mnt/my dir", "fuse.my fs", "my\\src\tx"),
                       ("/mnt/t\tab", "fuse.a\\b\nc\td", "src one\ntwo")]
    assert find_mount("/mnt/my dir/f", mounts).fstype == "fuse.my fs"
    if shutil.which("findmnt") is None:
        return
    table = tmp_path / "mountinfo"
    table.write_text(ESCAPED_MOUNTINFO)
    out = subprocess.run(["findmnt", "--tab-file", str(table), "--json", "--list", "-o", "TARGET,FSTYPE,SOURCE"],
                         capture_output=True, check=True).stdout
    want = [(f["target"], f["fstype"], f["source"]) for f in json.loads(out)["filesystems"]]
    assert got == want


def test_real_mount_of_this_machine(tmp_path):
    mount = find_mount(str(tmp_path))
    assert mount.fstype and mount.mount_point.startswith("/")


def test_lustre_v1_round_robin_over_osts():
    layout = lustre.parse_lov(rec.LUSTRE_V1, "lfs01")
    assert layout.stripe_size == MiB and layout.targets == ("lfs01-OST0001", "lfs01-OST0000")
    blocks = layout.blocks(3 * MiB + 5, 2 * MiB)
    assert [(b.offset, b.length, b.targets) for b in blocks] == [
        (3 * MiB + 5, MiB - 5, ("lfs01-OST0000",)),
        (4 * MiB, MiB, ("lfs01-OST0001",)),
        (5 * MiB, 5, ("lfs01-OST0000",)),
    ]


def test_lustre_v3_single_stripe_merges_up_to_block_size():
    layout = lustre.parse_lov(rec.LUSTRE_V3)
    assert layout.targets == ("OST0003",) and layout.stripe_size == 4 * MiB
    blocks = layout.blocks(0, 20 * MiB, merge_up_to=8 * MiB)
    assert [(b.offset, b.length) for b in blocks] == [(0, 8 * MiB), (8 * MiB, 8 * MiB), (16 * MiB, 4 * MiB)]


def test_lustre_pfl_components():
    layout = lustre.parse_lov(rec.LUSTRE_PFL, "lfs01")
    blocks = layout.blocks(0, 3 * MiB)
    assert blocks[0].targets == ("lfs01-OST0002",) and blocks[0].end == MiB
    # the second component has no objects yet: its bytes are reported without a target
    assert (blocks[-1].offset, blocks[-1].end, blocks[-1].targets) == (MiB, 3 * MiB, ())


@pytest.mark.parametrize("bad", [b"\x00" * 40, b"\xd0\x0b", bytes.fromhex("d00bd10b") + bytes(10)])
def test_lustre_rejects_garbage(bad):
    with pytest.raises(ValueError):
        lustre.parse_lov(bad)


def test_orangefs_distribution_handles_and_servers():
    assert orangefs.parse_distribution(rec.ORANGEFS_MD) == ("simple_stripe", 65536)
    assert orangefs.parse_handles(rec.ORANGEFS_DH) == (4611686018427388100, 6917529027641082000)
    values = {orangefs.DIST_XATTR: rec.ORANGEFS_MD, orangefs.HANDLES_XATTR: rec.ORANGEFS_DH}
    layout = orangefs.read_layout(reader(values), rec.ORANGEFS_CONFIG)
    blocks = layout.blocks(0, 4 * 65536)
    assert [b.hosts for b in blocks] == [("server01",), ("server02",)] * 2
    assert blocks[1].targets == ("tcp://server02:3334",)
    # without the server configuration the datafiles are named by handle, hosts unknown
    anonymous = orangefs.read_layout(reader(values)).blocks(0, 65536)
    assert anonymous[0].hosts == () and anonymous[0].targets == ("handle:40000000000000c4",)


def test_orangefs_other_distributions_and_malformed_values():
    basic = b"\x0a\x00\x00\x00basic_dist\x00\x00"
    assert orangefs.parse_distribution(basic) == ("basic_dist", None)
    assert orangefs.read_layout(reader({orangefs.DIST_XATTR: basic,
                                        orangefs.HANDLES_XATTR: rec.ORANGEFS_DH})) is None
    with pytest.raises(ValueError):
        orangefs.parse_handles(b"\x01\x02\x03")
    with pytest.raises(ValueError):
        orangefs.parse_distribution(rec.ORANGEFS_MD[:20])


@pytest.mark.parametrize(("source", "hosts"), [("tcp://ofs1:3334/orangefs", ("server01", "server02")),
                                               ("tcp://ofs1:3334,tcp://ofs2:3334/scratch", ("server02", "server01"))])
def test_orangefs_config_of_several_file_systems_gives_the_mounted_ones_ranges(source, hosts):
    """The DataHandleRanges of every <FileSystem> section were merged, and the first range
    holding a handle won: a file of "orangefs" was placed on the servers of "scratch", listed
    first. The section is the one whose Name ends the mount's source."""
    mount = Mount("/mnt/orangefs", "pvfs2", source)
    blocks = posix_block_locations("/mnt/orangefs/f", 0, 131072, 64 * MiB, mount=mount,
                                   read_xattr=reader({orangefs.DIST_XATTR: rec.ORANGEFS_MD,
                                                      orangefs.HANDLES_XATTR: rec.ORANGEFS_DH}),
                                   orangefs_config=rec.ORANGEFS_TWO_FS_CONFIG)
    assert [b.hosts for b in blocks] == [(host,) for host in hosts]
    assert orangefs.mounted_fs_name(source) == source.rsplit("/", 1)[-1]


@pytest.mark.parametrize(("source", "message"), [("pvfs2fuse", "2 OrangeFS file systems (scratch, orangefs)"),
                                                 ("tcp://ofs1:3334/other", "no OrangeFS file system named 'other'")])
def test_orangefs_config_without_the_mounted_file_system_is_an_error_naming_it(source, message):
    """A mount whose source names no file system (FUSE), or one the configuration lacks, cannot
    tell which handle ranges are its own: an error naming the configuration, not wrong hosts."""
    with pytest.raises(ValueError, match="server configuration describes 2 OrangeFS file systems"):
        orangefs.parse_server_config(rec.ORANGEFS_TWO_FS_CONFIG)
    values = {orangefs.DIST_XATTR: rec.ORANGEFS_MD, orangefs.HANDLES_XATTR: rec.ORANGEFS_DH}
    with pytest.raises(ValueError, match=f"^/etc/orangefs/fs.conf describes {re.escape(message)}"):
        posix_block_locations("/mnt/o/f", 0, 65536, 64 * MiB, mount=Mount("/mnt/o", "pvfs2", source),
                              read_xattr=reader(values), orangefs_config=rec.ORANGEFS_TWO_FS_CONFIG,
                              orangefs_config_path="/etc/orangefs/fs.conf")
    # A configuration of one file system serves a mount that does not name it.
    assert orangefs.read_layout(reader(values), rec.ORANGEFS_CONFIG).hosts == (("server01",), ("server02",))


def test_ceph_object_mapping():
    layout = cephfs.parse_layout(rec.CEPH_LAYOUT, inode=0x10000000000)
    assert (layout.stripe_unit, layout.stripe_count, layout.object_size, layout.pool) == (MiB, 4, 4 * MiB, "cephfs_data")
    assert layout.object_number(int(5.5 * MiB)) == 1
    assert layout.object_number(17 * MiB) == 5
    blocks = layout.blocks(0, 5 * MiB)
    assert [b.targets[0] for b in blocks] == [f"10000000000.{n:08x}" for n in (0, 1, 2, 3, 0)]
    with pytest.raises(ValueError):
        cephfs.parse_layout(b"stripe_unit=3 stripe_count=1 object_size=4")


def test_posix_block_locations_dispatch_on_recorded_mounts():
    lustre_mount = Mount("/lustre/lfs01", "lustre", "10.0.0.10@tcp:/lfs01")
    blocks = posix_block_locations("/lustre/lfs01/f", 0, 2 * MiB, 64 * MiB, mount=lustre_mount,
                                   read_xattr=reader({lustre.XATTR: rec.LUSTRE_V1}))
    assert [b.targets for b in blocks] == [("lfs01-OST0001",), ("lfs01-OST0000",)]
    ceph_mount = Mount("/mnt/ceph", "ceph", "mon:/")
    blocks = posix_block_locations("/mnt/ceph/f", 0, MiB, 64 * MiB, mount=ceph_mount,
                                   read_xattr=reader({cephfs.XATTR: rec.CEPH_LAYOUT}), inode=0xabc)
    assert blocks[0].targets == ("abc.00000000",)
    orange_mount = Mount("/mnt/orangefs", "pvfs2", "tcp://ofs1:3334/orangefs")
    blocks = posix_block_locations("/mnt/orangefs/f", 0, 131072, 64 * MiB, mount=orange_mount,
                                   read_xattr=reader({orangefs.DIST_XATTR: rec.ORANGEFS_MD,
                                                      orangefs.HANDLES_XATTR: rec.ORANGEFS_DH}),
                                   orangefs_config=rec.ORANGEFS_CONFIG)
    assert [b.hosts for b in blocks] == [("server01",), ("server02",)]
    # GPFS and NFS expose no layout: real blocks, hosts unknown (never this host)
    for fstype in ("gpfs", "nfs4"):
        blocks = posix_block_locations("/x", 0, 100 * MiB, 64 * MiB, mount=Mount("/", fstype, "s"),
                                       read_xattr=reader({}))
        assert [(b.length, b.hosts) for b in blocks] == [(64 * MiB, ()), (36 * MiB, ())]


def test_local_file_is_on_this_host_cut_at_the_logical_block_size(tmp_path):
    fs = hpcbridge.connect("/", block_size=MiB)
    path = f"{tmp_path}/f.bin"
    fs.write_bytes(path, os.urandom(2 * MiB + 10))
    if find_mount(path).fstype not in {"ext4", "xfs", "btrfs", "tmpfs", "overlay"}:
        pytest.skip(f"temp dir is on {find_mount(path).fstype}, not a local file system")
    blocks = fs.block_locations(path)
    assert [(b.offset, b.length) for b in blocks] == [(0, MiB), (MiB, MiB), (2 * MiB, 10)]
    assert all(b.hosts == (socket.gethostname(),) for b in blocks)
    named = hpcbridge.connect("/", hostname="node7").block_locations(path)
    assert named[0].hosts == ("node7",) and named[0].length == 2 * MiB + 10


def test_chunked_blocks_validation():
    with pytest.raises(ValueError, match="positive"):
        chunked_blocks(0, 10, 0)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting tmpfs needs root")
def test_find_mount_sees_mounts_made_after_its_first_use(tmp_path):
    # The parsed mount table is kept between calls; a mount or unmount must still show at once.
    target = tmp_path / "m"
    target.mkdir()
    assert find_mount(str(target)).mount_point != str(target)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "hpcbridge-test", str(target)], check=True)
    try:
        mount = find_mount(str(target))
        assert (mount.mount_point, mount.fstype, mount.source) == (str(target), "tmpfs", "hpcbridge-test")
    finally:
        subprocess.run(["umount", str(target)], check=True)
    assert find_mount(str(target)).mount_point != str(target)


def _findmnt_fstype(path):
    """findmnt's (util-linux) file system type of the mount at mount point ``path``."""
    import json

    out = subprocess.run(["findmnt", "--json", "-o", "TARGET,FSTYPE", "--mountpoint", path],
                         capture_output=True, check=True).stdout
    return json.loads(out.decode("utf-8", "surrogateescape"))["filesystems"][0]["fstype"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("findmnt") is None, reason="mounting tmpfs needs root")
def test_mount_points_with_line_breaking_characters_agree_with_findmnt(tmp_path):
    # The kernel escapes only space, tab, newline and backslash; "\r", "\f", U+0085 and U+2028
    # stay raw in mountinfo and must not end a line (the mount would be lost and its files
    # reported on the parent file system).
    names = ["sp ace", "ta\tb", "new\nline", "back\\slash", "cr\rret", "ff\x0cfeed", "nel\x85x", "u\u2028sep"]
    mounted = []
    try:
        for name in names:
            target = tmp_path / name
            target.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "hpcbridge-test", str(target)], check=True)
            mounted.append(target)
        for target in mounted:
            mount = find_mount(str(target / "file"))
            assert (mount.mount_point, mount.fstype) == (str(target), _findmnt_fstype(str(target)))
        for target in mounted:
            dev = target.stat().st_dev
            assert find_mount(str(target)).device == f"{os.major(dev)}:{os.minor(dev)}"
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", str(target)], check=True)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting needs root")
def test_mount_hidden_by_a_later_mount_over_its_parent_is_not_chosen(tmp_path):
    # /m/inner mounted, then /m mounted over it: /m/inner now names a directory of the new mount,
    # though the hidden mount's point is the longest prefix. os.stat's st_dev is the oracle.
    top = tmp_path / "m"
    (top / "inner").mkdir(parents=True)
    mounted = []
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "hidden", str(top / "inner")], check=True)
        mounted.append(top / "inner")
        subprocess.run(["mount", "-t", "ramfs", "over", str(top)], check=True)
        mounted.append(top)
        (top / "inner").mkdir()
        (top / "inner" / "f").write_bytes(b"x")
        dev = os.stat(top / "inner" / "f").st_dev
        for path in (top / "inner" / "f", top / "inner" / "not-yet"):
            mount = find_mount(str(path))
            assert (mount.mount_point, mount.fstype, mount.source) == (str(top), "ramfs", "over")
            assert mount.device == f"{os.major(dev)}:{os.minor(dev)}"
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", "-l", str(target)], check=True)


def _lov_v1(stripe_size, osts):
    """A lov_user_md_v1 (lustre_user.h) with one object per OST index in ``osts``."""
    import struct

    head = struct.pack("<II16sIHH", lustre.MAGIC_V1, lustre.PATTERN_RAID0, bytes(16), stripe_size, len(osts), 0)
    return head + b"".join(struct.pack("<16sII", bytes(16), 0, ost) for ost in osts)


def _lov_comp(entries):
    """A lov_comp_md_v1 from ``(lcme_id, lcme_flags, start, end, lmm)`` entries, as ``lfs
    mirror create`` stores it (lcm_mirror_count = mirrors - 1)."""
    import struct

    mirrors = len({lcme_id >> 16 for lcme_id, *_ in entries})
    offset = 32 + 48 * len(entries)
    table, blobs = b"", b""
    for lcme_id, flags, start, end, lmm in entries:
        table += struct.pack("<IIQQIIIQI", lcme_id, flags, start, end, offset + len(blobs), len(lmm), 0, 0, 0)
        blobs += lmm
    head = struct.pack("<IIIHHH6s8s", lustre.MAGIC_COMP_V1, offset + len(blobs), 0, 0, len(entries),
                       mirrors - 1, bytes(6), bytes(8))
    return head + table + blobs


def test_lustre_mirrored_file_blocks_cover_each_byte_once_with_every_current_mirror():
    # lfs mirror create -N -c1 -i0 -N -c2 -i1 -S 1M f, then a write: mirror 3 (OST4) went stale.
    # lfs getstripe lists each mirror's components over the whole file (lcme_mirror_id 1, 2, 3);
    # as HDFS replicas, a byte range is one block naming the OSTs of every mirror in sync.
    init, stale = 0x10, 0x10 | 0x01  # LCME_FL_INIT, LCME_FL_STALE (lustre_user.h)
    value = _lov_comp([
        (0x10001, init, 0, lustre.LUSTRE_EOF, _lov_v1(MiB, [0])),
        (0x20002, init, 0, 2 * MiB, _lov_v1(MiB, [1, 2])),
        (0x20003, init, 2 * MiB, lustre.LUSTRE_EOF, _lov_v1(MiB, [3])),
        (0x30004, stale, 0, lustre.LUSTRE_EOF, _lov_v1(MiB, [4])),
    ])
    blocks = lustre.parse_lov(value, "lfs01").blocks(0, 3 * MiB + 7, merge_up_to=4 * MiB)
    assert [(b.offset, b.length, b.targets) for b in blocks] == [
        (0, MiB, ("lfs01-OST0000", "lfs01-OST0001")),
        (MiB, MiB, ("lfs01-OST0000", "lfs01-OST0002")),
        (2 * MiB, MiB + 7, ("lfs01-OST0000", "lfs01-OST0003")),
    ]
    # Every byte once, whatever the range asked for.
    for start, length in [(5, 3 * MiB), (MiB - 1, 2), (3 * MiB, 1)]:
        got = lustre.parse_lov(value, "lfs01").blocks(start, length, 4 * MiB)
        assert got[0].offset == start and all(a.end == b.offset for a, b in zip(got, got[1:]))
        assert got[-1].end == start + length


def test_lustre_subdirectory_mount_names_osts_after_the_file_system():
    # mount -t lustre mgs@tcp:/lfs01/projects /mnt: the OSTs are still lfs01-OSTxxxx
    # (lfs osts; the OST's obd name), not "lfs01/projects-OSTxxxx".
    mount = Mount("/mnt/projects", "lustre", "10.0.0.10@tcp:10.0.0.11@tcp:/lfs01/projects")
    blocks = posix_block_locations("/mnt/projects/f", 0, 2 * MiB, 64 * MiB, mount=mount,
                                   read_xattr=reader({lustre.XATTR: rec.LUSTRE_V1}))
    assert [b.targets for b in blocks] == [("lfs01-OST0001",), ("lfs01-OST0000",)]


def test_lustre_foreign_layouts_have_no_osts_and_are_not_errors():
    # lov_foreign_md (lustre_user.h): magic 0x0BD70BD0, length, type, flags, value; lfs getstripe
    # prints it (lfm_magic, lfm_type, lfm_value) and the file reads normally: as a whole file
    # and as an FLR mirror next to an OST mirror (an HSM copy).
    import struct

    foreign = struct.pack("<IIII", 0x0BD70BD0, 8, 0xcb, 0) + b"s3://bkt"
    mount = Mount("/lustre/lfs01", "lustre", "10.0.0.10@tcp:/lfs01")
    blocks = posix_block_locations("/lustre/lfs01/f", 0, 3 * MiB, 2 * MiB, mount=mount,
                                   read_xattr=reader({lustre.XATTR: foreign}))
    assert [(b.offset, b.length, b.targets) for b in blocks] == [(0, 2 * MiB, ()), (2 * MiB, MiB, ())]
    mirrored = _lov_comp([(0x10001, 0x10, 0, lustre.LUSTRE_EOF, _lov_v1(MiB, [2])),
                          (0x20002, 0x10, 0, lustre.LUSTRE_EOF, foreign)])
    blocks = lustre.parse_lov(mirrored, "lfs01").blocks(0, MiB + 1)
    assert [(b.offset, b.length, b.targets) for b in blocks] == [
        (0, MiB, ("lfs01-OST0002",)), (MiB, 1, ("lfs01-OST0002",))]


def test_orangefs_range_lines_with_several_extents():
    # server-config.c: "Range {alias} {min1}-{max1}[, {min2}-{max2},...]"; a handle in a later
    # extent belongs to that alias's server as much as one in the first.
    config = rec.ORANGEFS_CONFIG.replace(
        "Range server01 4611686018427387905-6917529027641081855",
        "Range server01 4611686018427387905-4611686018427387999, 4611686018427388000-6917529027641081855")
    ranges = orangefs.parse_server_config(config)
    assert [(r.first, r.last, r.host) for r in ranges] == [
        (4611686018427387905, 4611686018427387999, "server01"),
        (4611686018427388000, 6917529027641081855, "server01"),
        (6917529027641081856, 9223372036854775806, "server02"),
    ]
    layout = orangefs.read_layout(reader({orangefs.DIST_XATTR: rec.ORANGEFS_MD,
                                          orangefs.HANDLES_XATTR: rec.ORANGEFS_DH}), config)
    assert layout.hosts == (("server01",), ("server02",))
