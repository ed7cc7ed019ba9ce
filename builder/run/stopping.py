"""Stopping on SIGINT or SIGTERM (Ctrl-C, `timeout`, a scheduler): one line saying what is
kept and how to resume, exit status 128 + the signal's number, within about a second
even while requests are in flight or models load."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

RESUME = "finished stages and every LLM answer are kept — run the same command again to resume"
# How long the unwinding may take (closing clients, flushing the LLM cache) before the
# process ends anyway: threads waiting on a slow model must not hold it up.
GRACE_S = 1.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """Raised in the main thread when a stop signal arrives. Like KeyboardInterrupt it is no
    Exception, so `except Exception` lets it through; unlike it, click does not turn it
    into "Aborted!"."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stop_line(signum: int) -> str:
    return f"interrupted by {signal.Signals(signum).name}; {RESUME}"


class _Stop:
    """The one stop of this process: the first stop signal, whether Stopped was raised in
    the main thread, and whether the line was printed."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.raised = False
        self.said = False
        self.lock = threading.Lock()

    def notice(self, signum: int) -> bool:
        """Record a stop signal; True for the first, which starts the deadline."""
        with self.lock:
            if self.signum is not None:
                return False
            self.signum = signum
        threading.Thread(target=_deadline, args=(signum,), name="stop-deadline", daemon=True).start()
        return True

    def say(self, signum: int) -> None:
        with self.lock:
            if self.said:
                return
            self.said = True
        print(stop_line(signum), file=sys.stderr, flush=True)


_stop = _Stop()


def say_stopped(signum: int) -> None:
    """Print the stop line, once per process whichever path gets there first."""
    _stop.say(signum)


def _deadline(signum: int) -> None:
    time.sleep(GRACE_S)
    _stop.say(signum)
    sys.stdout.flush()
    os._exit(128 + signum)


def _on_signal(signum: int, _frame: object) -> None:
    _stop.notice(signum)
    if not _stop.raised:  # a second signal must not break the unwinding
        _stop.raised = True
        raise Stopped(_stop.signum or signum)


def _watch(read_fd: int) -> None:
    """The kernel may hand a process signal to any thread; Python runs its handler only once
    the main thread executes bytecode, which it does not while it waits on a queue or a
    lock. So every signal also lands here (the wakeup fd): the first stop starts the
    deadline and is sent on to the main thread, which wakes and raises Stopped."""
    while data := os.read(read_fd, 64):
        for signum in data:
            if signum in _SIGNALS and _stop.notice(signum):
                signal.pthread_kill(threading.main_thread().ident or 0, signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within (in the main thread): SIGINT and SIGTERM raise Stopped in the main thread, and
    end the process GRACE_S later if it has not ended by then. The previous handlers come
    back after, unless a stop came (the process is then on its way out)."""
    previous = {s: signal.getsignal(s) for s in _SIGNALS}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_fd,), name="stop-watch", daemon=True).start()
    for s in _SIGNALS:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        if _stop.signum is None:
            for s, handler in previous.items():
                signal.signal(s, handler)
        # else ours stay: the watcher may still send the stop on to the main thread, and
        # the default action would kill the process before it says why.
        signal.set_wakeup_fd(previous_fd)
        os.close(write_fd)  # the watcher reads the end of the pipe and returns


def run_stoppable(command: Callable[[], None]) -> None:
    """Run `command` (a whole command line) under `stop_on_signals`; on a stop, print the
    line and exit with 128 + the signal's number."""
    try:
        with stop_on_signals():
            command()
    except Stopped as stop:
        say_stopped(stop.signum)
        sys.exit(stop.exit_code)
