"""Child processes (the Spark JVM, TLC) that end with their parent, and Ctrl-C as one line.

A JVM left behind by an interrupted ``txmq validate`` keeps a 2 GB heap and a core busy for nobody. Three
things make sure the children go when txmq goes:

- On Linux a child started here asks the kernel, between ``fork`` and ``exec``, to be sent SIGKILL when
  its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``): this holds even when txmq itself is killed with
  SIGKILL. The setting survives ``exec`` (so a ``spark-submit`` script that ``exec``\\ s java passes it on),
  but not ``fork``: a grandchild is not covered, and neither is a child whose parent *thread* ends first
  (the kernel ties it to the thread that forked), so start children from a thread that outlives them,
  as txmq does from its main thread.
- On an interrupt, :func:`interrupted` kills every child registered here before printing its one line,
  so that nothing keeps running (or printing) while Python shuts down.
- Elsewhere (macOS, Windows) there is no parent-death signal: interrupts and normal exits still end the
  children as above, but a txmq killed outright leaves them running (pyspark's JVM then exits by itself
  once it notices that its standard input closed, which it watches only after it has started up).

Usage::

    completed = run([java, "-version"], capture_output=True, text=True)   # like subprocess.run
    try:
        ...
    except KeyboardInterrupt:
        sys.exit(interrupted("txmq"))                                    # "txmq: interrupted", 130
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from txmq.errors import ExitCode

# A child started with a preexec_fn is forked by Python itself, and gRPC's fork handlers (loaded by txmq
# serve and txmq audit through the RocketMQ client) abort such a child. gRPC reads this when it loads.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
INTERRUPTED_EXIT_CODE = ExitCode.INTERRUPTED  # what a shell reports for a command ended by SIGINT (128 + 2)

_children: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()


def _load_prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once in the parent: the child must not load libraries between fork
    and exec."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl: Callable[..., int] = libc.prctl
    return prctl


_PRCTL = _load_prctl()


def dies_with_parent(then: Callable[[], object] | None = None) -> Callable[[], object] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process dies, then runs ``then`` (another
    ``preexec_fn``, e.g. pyspark's); just ``then`` where the platform has no parent-death signal.

    Without ``then`` it is libc's ``prctl`` itself, bound to its arguments: no Python code runs between
    fork and exec. Python code there can deadlock: a tracer (coverage's, under the tests) or any library
    may take a lock that another thread of this process held at the fork, and that nobody will release
    in the child. A parent that dies during those microseconds leaves the child without the signal."""
    if _PRCTL is None:
        return then
    prctl = _PRCTL
    if then is None:
        return functools.partial(prctl, PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above: nobody will signal us
            os.kill(os.getpid(), signal.SIGKILL)
        then()

    return preexec


def adopt(child: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
    """Register a child that :func:`kill_children` (and so :func:`interrupted`) must end."""
    _children.add(child)
    return child


def popen(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` for a child that dies with this process (any ``preexec_fn`` given runs too)."""
    kwargs["preexec_fn"] = dies_with_parent(kwargs.get("preexec_fn"))
    return adopt(subprocess.Popen(args, **kwargs))


def run(args: Sequence[str], *, timeout: float | None = None,
        **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` (no ``check``) for a child that dies with this process. As with
    ``subprocess.run``, the child is killed if the wait ends early: a timeout, an interrupt."""
    with popen(args, **kwargs) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except BaseException:
            child.kill()
            child.wait()
            raise
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def kill_children() -> None:
    """SIGKILL every registered child still running, and reap it."""
    for child in list(_children):
        if child.poll() is None:
            child.kill()
            child.wait()


def interrupted(prog: str) -> int:
    """End the children, print ``<prog>: interrupted`` as the only line, and return the exit code (130)."""
    kill_children()
    print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    return INTERRUPTED_EXIT_CODE


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (``kill PID``) raises KeyboardInterrupt like Ctrl-C, so that temporary files
    are removed and children ended as for an interrupt; outside the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def sigint_kept() -> Iterator[None]:
    """Whatever a library installs as its Ctrl-C handler within the block, SIGINT is handled as before
    after it: KeyboardInterrupt, or ignored when the process was started with it ignored (a shell's
    background job, which Ctrl-C must not stop). pyspark installs one that first asks the JVM to cancel
    its jobs over the very connection the interrupted call is using, and floods the terminal with the
    errors that follow. Outside the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
