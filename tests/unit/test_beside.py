"""streaming/app/beside.run_beside: a forked child's work and this process's at once."""
from __future__ import annotations

import os
import signal

import pytest

from streaming.app.beside import BesideError, run_beside


def test_both_pieces_run_and_the_child_in_another_process(tmp_path):
    here_pid = os.getpid()

    def child():
        (tmp_path / "child").write_text(str(os.getpid()))

    def here():
        (tmp_path / "here").write_text(str(os.getpid()))
    run_beside(child, here)
    assert int((tmp_path / "here").read_text()) == here_pid
    assert int((tmp_path / "child").read_text()) != here_pid


def test_the_childs_error_comes_back_as_its_text(tmp_path):
    def child():
        raise OSError(28, "No space left on device")
    ran = []
    with pytest.raises(BesideError, match=r"OSError: \[Errno 28\] No space left on device"):
        run_beside(child, lambda: ran.append(True))
    assert ran == [True]          # this process's piece ran to its end first


def test_a_child_killed_by_a_signal_is_an_error():
    with pytest.raises(BesideError, match="signal 9"):
        run_beside(lambda: os.kill(os.getpid(), signal.SIGKILL), lambda: None)


def test_this_process_error_wins_after_the_child_ended(tmp_path):
    def here():
        raise ValueError("here failed")
    with pytest.raises(ValueError, match="here failed"):
        run_beside(lambda: (tmp_path / "child").write_text("done"), here)
    assert (tmp_path / "child").read_text() == "done"   # waited for the child before raising


def test_without_fork_both_run_here_in_order():
    order = []
    run_beside(lambda: order.append(("child", os.getpid())), lambda: order.append(("here", os.getpid())),
               fork=False)
    assert order == [("child", os.getpid()), ("here", os.getpid())]
