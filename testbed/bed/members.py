"""Runner-side handles of member processes (Python: member.py; Java: java/*.java compiled
with javac against the cached kafka-clients jars, into the cache, never the repo).

Each member's stdout is read by a thread that keeps the JSON event lines; `wait_event`
returns once the member printed the event (e.g. "assigned": it is in the group)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from testbed.bed import jars
from testbed.bed.procs import BedError, Proc, wait_for

HERE = Path(__file__).resolve().parent
JAVA_SRC = HERE / "java"
JAVA_MAINS = {"java": "BedMember", "java-share": "BedShare", "java-streams": "BedStreams"}


def compile_java(mains: list[str], lib: Path) -> Path:
    """javac of BedCommon + `mains` against the jars in `lib`; cached by source hash."""
    sources = [JAVA_SRC / "BedCommon.java"] + [JAVA_SRC / f"{m}.java" for m in mains]
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.read_bytes())
    digest.update(str(sorted(p.name for p in lib.glob("*.jar"))).encode())
    out = lib.parent / "classes" / digest.hexdigest()[:16]
    if (out / ".complete").exists():
        return out
    if shutil.which("javac") is None:
        raise BedError("javac not found (the Java members need a JDK 17)")
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", jars.classpath(lib), *map(str, sources)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr[:300])
        raise BedError(f"javac failed for {', '.join(mains)} against {lib}: {first}")
    (out / ".complete").touch()
    return out


@dataclass
class MemberSpec:
    library: str                      # kafka-python | confluent | java | java-share | java-streams
    group: str
    topics: list
    client_id: str
    instance_id: str | None = None
    session_timeout_ms: int = 6000
    max_poll_interval_ms: int = 300000
    protocol: str = "classic"         # classic | consumer | streams
    slow_ms: int = 0
    extra: dict = field(default_factory=dict)
    # kafka-python only: connect from this loopback address (127.0.0.2 and up), a host of its own
    source_address: str | None = None

    @property
    def host(self) -> str:
        """The client host the broker records for it."""
        return f"/{self.source_address or '127.0.0.1'}"


class Member:
    """One running member process; `events` holds its parsed stdout lines."""

    def __init__(self, spec: MemberSpec, bootstrap: str, out_dir: Path, java_lib: Path | None = None,
                 name: str | None = None):
        self.spec = spec
        self.events: list[dict] = []
        self.stop_file = out_dir / f"{name or spec.client_id}.stop-polling"
        self._cond = threading.Condition()
        args = ["--bootstrap", bootstrap, "--group", spec.group, "--topics", ",".join(spec.topics),
                "--client-id", spec.client_id, "--session-timeout-ms", str(spec.session_timeout_ms),
                "--max-poll-interval-ms", str(spec.max_poll_interval_ms), "--protocol", spec.protocol,
                "--slow-ms", str(spec.slow_ms), "--stop-file", str(self.stop_file)]
        if spec.instance_id:
            args += ["--instance-id", spec.instance_id]
        if spec.library in JAVA_MAINS:
            if java_lib is None:
                raise BedError(f"member {spec.client_id}: {spec.library} needs the Java client jars")
            classes = compile_java([JAVA_MAINS[spec.library]], java_lib)
            cp = os.pathsep.join([str(classes), jars.classpath(java_lib)])
            if spec.extra:
                args += ["--props", ",".join(f"{k}={v}" for k, v in spec.extra.items())]
            if spec.library == "java-streams":
                args += ["--state-dir", str(out_dir / f"{spec.client_id}.state")]
            cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, JAVA_MAINS[spec.library], *args]
        else:
            if spec.source_address:
                args += ["--source-address", spec.source_address]
            cmd = [sys.executable, str(HERE / "member.py"), "--library", spec.library, *args,
                   "--extra", json.dumps(spec.extra)]
        self.proc = Proc(cmd, name or spec.client_id, out_dir, stdout_pipe=True)
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._read, name=f"member-{spec.client_id}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.proc.popen.stdout
        assert stdout is not None, "members are started with stdout_pipe=True"
        with open(self.proc.stdout_path, "ab") as copy:
            for raw in stdout:
                copy.write(raw)
                copy.flush()
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()

    def mark(self) -> int:
        return len(self.events)

    def wait_event(self, name: str, timeout: float, since: int = 0, where=None) -> dict:
        """The first `name` event after `since` (for which `where(event)` holds, when given)."""
        def found():
            for ev in self.events[since:]:
                if ev.get("event") == name and (where is None or where(ev)):
                    return ev
            if ev_err := next((e for e in self.events[since:] if e.get("event") == "error"), None):
                raise BedError(f"member {self.spec.client_id} reported: {ev_err.get('error')}")
            return None

        def alive():
            if not self.proc.alive() and not found():
                raise BedError(f"member {self.spec.client_id} ({self.spec.library}) exited with "
                               f"{self.proc.popen.returncode} before '{name}': {self.proc.tail(800)}")
        return wait_for(found, timeout, f"member {self.spec.client_id} ({self.spec.library}, group "
                        f"{self.spec.group}) to print '{name}'", alive=alive)

    def owned(self) -> set:
        """What the client owns now, by its callbacks (eager clients name their whole assignment,
        cooperative and KIP-848 ones what changes)."""
        owned: set = set()
        for ev in list(self.events):
            if ev.get("event") == "assigned":
                owned |= set(ev.get("partitions") or [])
            elif ev.get("event") in ("revoked", "lost"):
                owned -= set(ev.get("partitions") or [])
        return owned

    def stop_polling(self) -> None:
        self.stop_file.touch()

    def resume_polling(self) -> None:
        self.stop_file.unlink(missing_ok=True)

    def signal(self, sig: int) -> None:
        self.proc.signal(sig)

    def kill(self) -> None:
        self.proc.kill()

    def pause(self) -> None:
        self.proc.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.signal(signal.SIGCONT)

    def close(self, timeout: float = 30.0) -> int:
        """SIGTERM: the member closes its consumer (LeaveGroup for a dynamic member)."""
        self.proc.signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._reader.join(5)
        self.proc.close_files()
        return code

    def alive(self) -> bool:
        return self.proc.alive()
