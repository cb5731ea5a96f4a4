"""Apache Hadoop's HDFS jars from Maven Central, resolved once into a cache directory.

No Hadoop tarball is needed: ``mvn dependency:copy-dependencies`` on a three-line pom brings
hadoop-hdfs, hadoop-common and hadoop-hdfs-client with their dependencies (~120 jars, ~64 MB).
The Maven jars lack the ``webapps/`` resources the NameNode and DataNode HTTP servers look up on
the classpath; empty ``webapps/{hdfs,datanode,static,secondary}`` directories in a classpath
directory satisfy them (WebHDFS registers its servlets in code), and a log4j.properties there
makes the daemons log.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["HADOOP_VERSION", "hadoop_home", "ensure_hadoop", "ensure_libhdfs", "java_command", "JVM_OPTIONS"]

HADOOP_VERSION = os.environ.get("HPCBRIDGE_HADOOP_VERSION", "3.4.1")

#: Java 17 needs these for Hadoop's reflection into the JDK.
JVM_OPTIONS = [
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "-Djava.net.preferIPv4Stack=true",
]

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>hpcbridge</groupId><artifactId>hdfs-testbed</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-hdfs</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-common</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-hdfs-client</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"""

_LOG4J = """log4j.rootLogger=INFO, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
"""


# A rack mapping by DataNode *host name*. Hadoop's TableMapping and ScriptBasedMapping are
# "cached" mappings, which the NameNode resolves by the IP the DataNode registered from; on one
# machine every DataNode connects from 127.0.0.1, so those would put all of them in one rack.
_TOPOLOGY_JAVA = """package hpcbridge;
import java.util.*;
import org.apache.hadoop.conf.*;
import org.apache.hadoop.net.DNSToSwitchMapping;
public class HostTableMapping extends Configured implements DNSToSwitchMapping {
  public List<String> resolve(List<String> names) {
    Map<String, String> table = new HashMap<>();
    for (String pair : getConf().getTrimmedStrings("hpcbridge.topology.table")) {
      String[] kv = pair.split("=", 2);
      if (kv.length == 2) table.put(kv[0], kv[1]);
    }
    List<String> racks = new ArrayList<>();
    for (String name : names) racks.add(table.getOrDefault(name, "/default-rack"));
    return racks;
  }
  public void reloadCachedMappings() {}
  public void reloadCachedMappings(List<String> names) {}
}
"""


def hadoop_home() -> Path:
    """The cache directory of the resolved Hadoop jars (``$HPCBRIDGE_CACHE/hadoop-<version>``)."""
    cache = os.environ.get("HPCBRIDGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hpcbridge")
    return Path(cache) / f"hadoop-{HADOOP_VERSION}"


def ensure_hadoop(quiet: bool = True) -> Path:
    """Resolve the Hadoop jars with Maven unless already cached; return the cache directory.

    Layout: ``lib/*.jar`` (the classpath), ``classpath/`` (webapps stubs and log4j.properties).

    Raises
    ------
    FileNotFoundError
        If ``mvn`` or ``java`` is not installed (``make test`` installs them).
    RuntimeError
        If Maven fails (its output is included).
    """
    home = hadoop_home()
    marker = home / "lib" / ".complete"
    if not marker.exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise FileNotFoundError("mvn (Maven) is not installed: apt-get install maven, or run make test")
        home.mkdir(parents=True, exist_ok=True)
        (home / "pom.xml").write_text(_POM.format(v=HADOOP_VERSION))
        args = [mvn, "-B", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
                f"-DoutputDirectory={home / 'lib'}", "-DincludeScope=runtime"]
        if quiet:
            args.insert(2, "-q")
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"Maven could not resolve Hadoop {HADOOP_VERSION}:\n{run.stdout[-3000:]}{run.stderr[-2000:]}")
        marker.write_text(HADOOP_VERSION)
    classpath = home / "classpath"
    for webapp in ("hdfs", "datanode", "static", "secondary", "journal"):
        (classpath / "webapps" / webapp).mkdir(parents=True, exist_ok=True)
    (classpath / "log4j.properties").write_text(_LOG4J)
    _compile_topology(home, classpath)
    return home


def _compile_topology(home: Path, classpath: Path) -> None:
    target = classpath / "hpcbridge" / "HostTableMapping.class"
    if target.exists():
        return
    javac = shutil.which("javac")
    if javac is None:
        raise FileNotFoundError("javac is not installed: apt-get install openjdk-17-jdk-headless, or run make test")
    source_dir = home / "src" / "hpcbridge"
    source_dir.mkdir(parents=True, exist_ok=True)
    (source_dir / "HostTableMapping.java").write_text(_TOPOLOGY_JAVA)
    run = subprocess.run([javac, "-d", str(classpath), "-cp", str(home / "lib" / "*"),
                          str(source_dir / "HostTableMapping.java")], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"javac failed on the rack mapping:\n{run.stderr[-2000:]}")


def java_command(main_class: str, conf_dir: Path, args: list[str] = (), heap: str = "512m") -> list[str]:
    """The command line of one Hadoop JVM (NameNode, DataNode, FsShell, ...) with ``conf_dir``."""
    java = shutil.which("java")
    if java is None:
        raise FileNotFoundError("java is not installed: apt-get install openjdk-17-jre-headless, or run make test")
    home = hadoop_home()
    classpath = os.pathsep.join([str(conf_dir), str(home / "classpath"), str(home / "lib" / "*")])
    return [java, f"-Xmx{heap}", *JVM_OPTIONS, "-cp", classpath, main_class, *args]


#: The crate that vendors Apache Hadoop's libhdfs C sources (crates.io, Apache-2.0) and its API level.
HDFS_SYS_VERSION = "0.3.1"
LIBHDFS_API = "hdfs_3_3"

_CARGO_TOML = """[package]
name = "hpcbridge-libhdfs-sources"
version = "0.0.0"
edition = "2021"
[dependencies]
hdfs-sys = {{ version = "={v}", default-features = false }}
"""


def _java_home() -> Path:
    java = os.environ.get("JAVA_HOME") or ""
    if not java:
        binary = shutil.which("javac") or shutil.which("java")
        if binary is None:
            raise FileNotFoundError("no JDK: apt-get install openjdk-17-jdk-headless, or run make test")
        java = str(Path(os.path.realpath(binary)).parent.parent)
    home = Path(java)
    if not (home / "include" / "jni.h").exists():
        raise FileNotFoundError(f"{home} has no include/jni.h: libhdfs needs a JDK (openjdk-17-jdk-headless)")
    return home


def _hdfs_sys_sources() -> Path:
    """The unpacked hdfs-sys crate, fetched by cargo into its registry (a throw-away manifest)."""
    cargo_home = Path(os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo"))
    pattern = str(cargo_home / "registry" / "src" / "*" / f"hdfs-sys-{HDFS_SYS_VERSION}" / "libhdfs")
    found = sorted(glob.glob(pattern))
    if not found:
        cargo = shutil.which("cargo") or (str(cargo_home / "bin" / "cargo")
                                          if (cargo_home / "bin" / "cargo").exists() else None)
        if cargo is None:
            raise FileNotFoundError("cargo is not installed (apt-get install cargo): libhdfs is built from the "
                                    f"hdfs-sys {HDFS_SYS_VERSION} crate's sources")
        with tempfile.TemporaryDirectory(prefix="hpcbridge-hdfs-sys-") as manifest:
            (Path(manifest) / "src").mkdir()
            (Path(manifest) / "src" / "lib.rs").write_text("")
            (Path(manifest) / "Cargo.toml").write_text(_CARGO_TOML.format(v=HDFS_SYS_VERSION))
            run = subprocess.run([cargo, "fetch", "--manifest-path", str(Path(manifest) / "Cargo.toml")],
                                 capture_output=True, text=True)
            if run.returncode:
                raise RuntimeError(f"cargo fetch of hdfs-sys {HDFS_SYS_VERSION} failed:\n{run.stderr[-2000:]}")
        found = sorted(glob.glob(pattern))
        if not found:
            raise RuntimeError(f"cargo fetch succeeded but {pattern} does not exist")
    return Path(found[-1])


def libhdfs_cache() -> Path:
    """Where set-up keeps the built libhdfs.so (``$HPCBRIDGE_CACHE/libhdfs``)."""
    return hadoop_home().parent / "libhdfs"


def ensure_libhdfs() -> Path:
    """Build libhdfs.so from the hdfs-sys crate's vendored Hadoop sources unless cached; return its directory.

    One gcc command (about a second) against the JDK's JNI headers and libjvm (found again at run
    time through an rpath). pyarrow's ``HadoopFileSystem`` loads it (``driver="libhdfs"``).

    Raises
    ------
    FileNotFoundError
        If cargo, gcc or a JDK is missing (the message says which).
    RuntimeError
        If the fetch or the compilation fails (with its output).
    """
    target_dir = libhdfs_cache()
    target = target_dir / "libhdfs.so"
    if target.exists():
        return target_dir
    gcc = shutil.which("gcc")
    if gcc is None:
        raise FileNotFoundError("gcc is not installed: apt-get install build-essential")
    jdk = _java_home()
    src = _hdfs_sys_sources()
    api = src / LIBHDFS_API
    sources = [api / "hdfs.c", api / "jni_helper.c", api / "exception.c", api / "jclasses.c",
               *sorted((api / "os" / "posix").glob("*.c"))]
    target_dir.mkdir(parents=True, exist_ok=True)
    partial = target_dir / f".libhdfs.so.{os.getpid()}"
    command = [gcc, "-O2", "-fPIC", "-shared", "-o", str(partial), f"-I{src}", f"-I{api}", f"-I{api / 'os'}",
               f"-I{api / 'os' / 'posix'}", f"-I{api / 'include'}", f"-I{jdk / 'include'}",
               f"-I{jdk / 'include' / 'linux'}", *map(str, sources), f"-L{jdk / 'lib' / 'server'}", "-ljvm",
               f"-Wl,-rpath,{jdk / 'lib' / 'server'}", "-lpthread"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"building libhdfs.so failed:\n{' '.join(command)}\n{run.stderr[-3000:]}")
    os.replace(partial, target)
    (target_dir / "SOURCE").write_text(f"hdfs-sys {HDFS_SYS_VERSION} ({LIBHDFS_API}) from crates.io; JDK {jdk}\n")
    return target_dir
