"""Compile and run the project's small Java programs in ``tests/java/`` against the real RocketMQ 4.9 jars.

The programs (``JavaProducer``, ``JavaConsumer``, ``CommitLogDecoder``; docs/real_peers.md, "Real Java clients")
are compiled with ``javac -cp '.jvm/rocketmq-4.9/lib/*:.jvm/typed-bodies/lib/*'`` (the second: Apache Avro's Java
library and protobuf-java, for ``TypedBodiesProducer``) into ``.jvm/classes/java-clients`` (git-ignored) the first
time they are needed and again whenever a ``.java`` file is newer than the last build. A missing
``.jvm/rocketmq-4.9/lib`` or ``.jvm/typed-bodies/lib`` (``make jvm-peers`` not run) fails the calling test; it is
never a skip.

:func:`run_java` runs one program in its own small JVM with a bounded timeout, keeps the RocketMQ client's log
in a folder of the test's choosing and returns a :class:`JavaRun` (stdout JSON lines parsed); on a timeout or,
with ``check=True``, a non-zero exit it raises :class:`JavaToolError` carrying stderr and the client log tail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROCKETMQ_LIB = ROOT / ".jvm" / "rocketmq-4.9" / "lib"
#: Apache Avro's Java library and protobuf-java (jvm/typed-bodies.pom.xml), after the RocketMQ jars on the classpath
TYPED_BODIES_LIB = ROOT / ".jvm" / "typed-bodies" / "lib"
SOURCES = ROOT / "tests" / "java"
CLASSES = ROOT / ".jvm" / "classes" / "java-clients"
COMPILE_TIMEOUT_S = 120.0
#: JVM flags for short-lived client programs: a small heap and a quick start (C1 only, serial GC).
JVM_FLAGS = ("-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dfile.encoding=UTF-8")

_compile_lock = threading.Lock()
# The remoting and common jars log through slf4j/logback; without a config logback prints to stdout, which
# carries the programs' JSON lines. This sends those logs to java.log next to the client's own log.
_LOGBACK_XML = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} [%thread] %-5level %logger - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


class JavaToolError(AssertionError):
    """A Java program failed to compile, timed out or exited non-zero; the message holds its stderr."""


def require_rocketmq_lib() -> Path:
    """The staged RocketMQ 4.9 jar folder; raises JavaToolError (a test failure) when it is missing."""
    if not any(ROCKETMQ_LIB.glob("rocketmq-client-*.jar")):
        raise JavaToolError(f"the real RocketMQ 4.9 jars are missing in {ROCKETMQ_LIB}: run `make jvm-peers`")
    if not any(TYPED_BODIES_LIB.glob("avro-*.jar")) or not any(TYPED_BODIES_LIB.glob("protobuf-java-*.jar")):
        raise JavaToolError(f"the Avro and protobuf-java jars are missing in {TYPED_BODIES_LIB}: run `make jvm-peers`")
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise JavaToolError("java and javac (JDK 17) must be on PATH to run the Java interop programs")
    return ROCKETMQ_LIB


def _classpath() -> str:
    return f"{CLASSES}{os.pathsep}{_libraries()}"


def _libraries() -> str:
    return f"{ROCKETMQ_LIB}/*{os.pathsep}{TYPED_BODIES_LIB}/*"


def compiled_classes() -> Path:
    """Compile ``tests/java/*.java`` when the build is missing or older than a source; returns the class folder.

    The build goes to a fresh folder that replaces ``CLASSES`` only once javac succeeded. Raises
    JavaToolError with javac's output when compilation fails.
    """
    require_rocketmq_lib()
    sources = sorted(SOURCES.glob("*.java"))
    stamp = CLASSES / ".built"
    with _compile_lock:
        newest = max(p.stat().st_mtime for p in sources)
        if stamp.exists() and stamp.stat().st_mtime >= newest:
            return CLASSES
        CLASSES.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix="java-clients-", dir=CLASSES.parent))
        proc = subprocess.run(
            ["javac", "-encoding", "UTF-8", "-nowarn", "-d", str(build), "-cp", _libraries(),
             *map(str, sources)], capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if proc.returncode != 0:
            shutil.rmtree(build, ignore_errors=True)
            raise JavaToolError(f"javac failed for {SOURCES}:\n{proc.stdout}{proc.stderr}")
        (build / ".built").touch()
        shutil.rmtree(CLASSES, ignore_errors=True)
        build.rename(CLASSES)
    return CLASSES


@dataclass
class JavaRun:
    """One finished program run: exit code, stdout lines parsed as JSON, raw stderr, the client log folder."""

    returncode: int
    lines: list[dict]
    stdout: str
    stderr: str
    log_dir: Path

    def describe(self) -> str:
        """Exit code, stderr tail and RocketMQ client log tail, for assertion messages."""
        return (f"exit code {self.returncode}\n--- stderr (tail) ---\n{self.stderr[-4000:]}\n"
                f"--- client log (tail) ---\n{client_log_tail(self.log_dir)}")


def client_log_tail(log_dir: Path, chars: int = 4000) -> str:
    """The end of the RocketMQ client's log (``rocketmq_client.log``) and of ``java.log`` in ``log_dir``."""
    tails = []
    for name in ("rocketmq_client.log", "java.log"):
        try:
            tails.append(f"[{name}]\n" + (Path(log_dir) / name).read_text(encoding="utf-8", errors="replace")[-chars:])
        except OSError:
            tails.append(f"[{name}] (none)")
    return "\n".join(tails)


def run_java(main: str, args: list[str], *, log_dir: Path, props: dict[str, str] | None = None,
             timeout_s: float = 60.0, check: bool = True) -> JavaRun:
    """Run ``tests/java/<main>.java`` with ``args`` in its own JVM and return its result.

    ``props`` become ``-Dkey=value`` (e.g. ``rocketmq.serialize.type``); the client's log goes to ``log_dir``
    (``rocketmq.client.logRoot``). stdout must be JSON lines (UTF-8). Raises JavaToolError on a timeout (the
    JVM is killed), on a line that is not JSON, or — with ``check`` — on a non-zero exit code.
    """
    compiled_classes()
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    logback = log_dir / "logback.xml"
    logback.write_text(_LOGBACK_XML.format(log=log_dir / "java.log"), encoding="utf-8")
    defines = {"rocketmq.client.logRoot": str(log_dir), "rocketmq.client.logFileMaxIndex": "1",
               "logback.configurationFile": str(logback), **(props or {})}
    cmd = ["java", *JVM_FLAGS, *(f"-D{k}={v}" for k, v in defines.items()),
           "-cp", _classpath(), main, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout_s, cwd=log_dir, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode("utf-8", "replace")
        out = (exc.stdout or b"").decode("utf-8", "replace")
        raise JavaToolError(f"{main} {' '.join(args)} did not finish within {timeout_s} s\n--- stdout (tail) ---\n"
                            f"{out[-2000:]}\n--- stderr (tail) ---\n{err[-4000:]}\n--- client log (tail) ---\n"
                            f"{client_log_tail(log_dir)}") from None
    stdout = proc.stdout.decode("utf-8")
    stderr = proc.stderr.decode("utf-8", "replace")
    lines = []
    for n, line in enumerate(stdout.splitlines(), 1):
        try:
            lines.append(json.loads(line))
        except ValueError as exc:
            raise JavaToolError(f"{main}: stdout line {n} is not JSON ({exc}): {line[:200]!r}\n{stderr[-2000:]}") \
                from None
    run = JavaRun(proc.returncode, lines, stdout, stderr, log_dir)
    if check and proc.returncode != 0:
        raise JavaToolError(f"{main} {' '.join(args)} failed: {run.describe()}")
    return run


__all__ = ["CLASSES", "ROCKETMQ_LIB", "TYPED_BODIES_LIB", "JavaRun", "JavaToolError", "client_log_tail",
           "compiled_classes", "require_rocketmq_lib", "run_java"]
