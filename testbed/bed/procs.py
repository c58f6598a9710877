"""Process and waiting helpers: every child in its own session with stdout/stderr in files,
a registry so that nothing outlives the bed (atexit and context managers kill what is left),
and bounded waits that name what they waited for."""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TypeVar
from collections.abc import Callable

T = TypeVar("T")
_LIVE: dict[int, Proc] = {}


class BedTimeout(TimeoutError):
    """A bounded wait ran out; the message names what was awaited."""


class BedError(RuntimeError):
    """A clear, one-line failure of the bed (missing jar, port in use, process died)."""


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.05, alive: Callable[[], None] | None = None) -> T:
    """Polls `predicate` until it returns something truthy (returned) or `timeout` s pass.
    `alive` may raise to stop early (a process that died while we wait for it)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            raise BedTimeout(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), 0.2).close()
        return True
    except OSError:
        return False


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class Proc:
    """A child process in its own session; output in `<out_dir>/<name>.stdout|.stderr`."""

    def __init__(self, cmd: list[str], name: str, out_dir: Path, env: dict | None = None,
                 cwd: Path | None = None, stdout_pipe: bool = False):
        out_dir.mkdir(parents=True, exist_ok=True)
        self.name, self.cmd = name, cmd
        self.stdout_path = out_dir / f"{name}.stdout"
        self.stderr_path = out_dir / f"{name}.stderr"
        self._err = open(self.stderr_path, "ab")
        self._out = None if stdout_pipe else open(self.stdout_path, "ab")
        self.popen = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True,
                                      stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if stdout_pipe else self._out,
                                      stderr=self._err)
        self.pid = self.popen.pid
        _LIVE[self.pid] = self

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise BedTimeout(f"timed out after {timeout:.0f} s waiting for {self.name} (pid {self.pid}) "
                             "to exit") from None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited after `timeout` s."""
        self.signal(signal.SIGCONT)   # a stopped process cannot act on SIGTERM
        self.signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except BedTimeout:
            return self.kill()

    def kill(self) -> int:
        self.signal(signal.SIGKILL)
        try:
            os.killpg(self.pid, signal.SIGKILL)   # children left in the group
        except (ProcessLookupError, PermissionError):
            pass
        code = self.popen.wait(10)
        self.close_files()
        return code

    def close_files(self) -> None:
        _LIVE.pop(self.pid, None)
        for f in (self._out, self._err):
            if f is not None and not f.closed:
                f.close()

    def tail(self, chars: int = 2000) -> str:
        text = ""
        for p in (self.stdout_path, self.stderr_path):
            if p.exists():
                text += p.read_text(errors="replace")[-chars:]
        return text


def kill_all() -> None:
    """Kills every child still registered (the bed's last line of defence)."""
    for proc in list(_LIVE.values()):
        try:
            proc.kill()
        except Exception:
            pass


atexit.register(kill_all)
