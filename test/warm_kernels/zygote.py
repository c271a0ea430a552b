"""Warm kernels for the test suites: IPython kernels forked from a process that has imported
torch already.

Why: a kernel costs ~0.5 s of CPU to start, ~2.2 s more to import torch and ~1.7 s more the
first time it makes an optimizer (torch._dynamo's import), measured on the 2-core CI machine.
The Python and browser suites start ~140 kernels, so that was most of their CPU. Forked from
this zygote, which has imported torch and torch._dynamo, a kernel pays only its own start.

What a test gets is still a real ipykernel kernel, started by jupyter_client from a kernelspec
(``python3``, in a folder put first on ``JUPYTER_PATH``), spoken to over ZeroMQ, with the
bridge bootstrapped as the front end does. Three things differ from a cold kernel, and a test
for which one matters asks for a cold one (``VRAMSCOPE_COLD_KERNEL=1`` in the kernel's
environment; the transparency suite does): torch and torch._dynamo (and the modules the kernel
itself imports as it starts, ``PRELOAD``) are in ``sys.modules`` before the first cell, so
``import torch`` in a cell does not load it; their objects are frozen (``gc.freeze``: never
collected, nor listed by ``gc.get_objects``); and the kernel's parent is the zygote, not the
process jupyter_client started (``launch.py``, which passes signals on and exits with the
kernel).

A request whose environment differs from the zygote's in what is read at import time
(``IMPORT_TIME``), or whose interpreter or ``sys.path`` differ, is declined: that kernel starts
cold. So is every request while this process runs a thread that the preload did not start (a
fork would copy a lock another thread holds).

Run: ``python test/warm_kernels/zygote.py --dir DIR --watch-pid PID``. It writes the
kernelspecs ``DIR/kernels/python3`` and ``python3-cold`` (a cold kernel by name, for a browser
test), listens on ``DIR/zygote.sock`` and prints ``ready`` to its standard output once it
serves; it ends (and kills the kernels it forked that still run) when PID has ended or on
SIGTERM, and removes DIR. ``start()`` does this for
test/python/conftest.py, and ``--start DIR`` (which prints the environment to set) for
ui-tests/playwright.config.ts.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from launch import SOCKET_ENV

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "launch.py")
#: Environment variables read while the preloaded modules were imported (by the interpreter,
#: the C libraries torch links, numpy, sympy, torch; the temporary folder and user name that
#: torch._dynamo's cache folder is made of): a request that differs here starts cold.
IMPORT_TIME = (
    "PYTHON",
    "LANG",
    "LC_",
    "TMPDIR",
    "TEMP",
    "TMP",
    "USER",
    "LOGNAME",
    "HOME",
    "SYMPY",
    "MPMATH",
    "TQDM",
    "LD_",
    "GLIBC_TUNABLES",
    "MALLOC_",
    "TORCH",
    "PYTORCH",
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL",
    "OPENBLAS",
    "NUMPY",
    "CUDA",
    "NVIDIA",
    # ... and by IPython, jupyter_core, pyzmq, tornado and traitlets
    "IPYTHON",
    "IN_SPHINX_RUN",
    "JUPYTER_ALLOW_INSECURE_WRITES",
    "JUPYTER_PLATFORM_DIRS",
    "JUPYTER_USE_PROGRAMDATA",
    "PYZMQ",
    "TERM",
    "TORNADO",
    "TRAITLETS",
    # ... and by debugpy's pydevd (ipykernel's debugger) and psutil (the bridge's)
    "PYDEVD",
    "DEBUGPY",
    "PSUTIL",
)
#: ... but for these, read when called (lightning's import sets the first in its process, so
#: a test process that imported lightning passes it on to the kernels it starts)
CALL_TIME = frozenset({"PYTORCH_NVML_BASED_CUDA_CHECK"})
#: torch (with numpy, sympy and the standard library it imports), torch._dynamo (which a
#: kernel imports the first time it makes an optimizer), and what a kernel imports as it starts
#: (IPython, ipykernel's shell, jupyter_client, pyzmq, tornado, comm: ~0.15 s of CPU a kernel;
#: ipykernel's debugger, debugpy's pydevd: ~0.13 s more; the rest of ipykernel's and
#: IPython's start, sqlite3 for the history and psutil for the bridge: ~0.05 s), but
#: ipykernel.kernelapp itself, whose defaults are its kernel's own environment
#: (JPY_PARENT_PID, JPY_INTERRUPT_EVENT). The debugger's import sets PYDEVD_USE_FRAME_EVAL,
#: which every kernel gets (``added``), as a kernel that imports it sets it; its warning about
#: frozen modules goes to this process's stderr instead of each kernel's.
PRELOAD = (
    "torch",
    "torch._dynamo",
    "IPython",
    "IPython.core.shellapp",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.extensions.storemagic",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "ipykernel.control",
    "ipykernel.heartbeat",
    "ipykernel.parentpoller",
    "jupyter_client",
    "zmq",
    "tornado",
    "tornado.platform.asyncio",
    "tornado.queues",
    "comm",
    "sqlite3",
    "psutil",
)
PR_SET_PDEATHSIG = 1
#: How long the zygote waits for a kernel it killed (its launcher gone) before serving on
KILLED_WAIT_S = 5.0


def _import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME) and k not in CALL_TIME}


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(message).encode() + b"\n")


class Zygote:
    def __init__(self, path: str, watch_pid: int, env: dict[str, str]) -> None:
        """``env``: this process's environment before the preload."""
        self.path = path
        self.watch_pid = watch_pid
        self.env = _import_time_env(env)
        #: what the preload put in the environment (torch._dynamo: TORCHINDUCTOR_CACHE_DIR),
        #: as it would in a cold kernel's once that imported the same
        self.added = {k: v for k, v in os.environ.items() if k not in env}
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        #: kernel pid -> the connection of its launcher
        self.kernels: dict[int, socket.socket] = {}
        self.stopping = False
        #: threads after the preload: OpenBLAS's server (numpy's import starts it), which
        #: stops itself before a fork and starts again after (pthread_atfork)
        self.native_threads = _thread_count()

    # --- serving ------------------------------------------------------------------------------

    def serve(self) -> None:
        staging = self.path + ".new"
        if os.path.exists(staging):
            os.unlink(staging)
        self.listener.bind(staging)
        self.listener.listen(64)
        os.replace(staging, self.path)  # connectable from the moment it has its name
        signal.signal(signal.SIGTERM, self._stop)
        print("ready", flush=True)
        while not self.stopping:
            conns = list(self.kernels.values())
            try:
                readable, _, _ = select.select([self.listener, *conns], [], [], 0.2)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                readable = []
            # a launcher gone before a new request: its kernel is ended before the next fork
            for sock in sorted(readable, key=lambda sock: sock is self.listener):
                if sock is self.listener:
                    self._accept()
                else:
                    self._launcher_gone(sock)
            self._reap()
            if not _alive(self.watch_pid):
                break
        for pid in list(self.kernels):
            _killpg(pid, signal.SIGKILL)
        time.sleep(0.2)
        self._reap()
        if os.path.exists(self.path):
            os.unlink(self.path)

    def _stop(self, _signum: int, _frame: object) -> None:
        self.stopping = True

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        fds: list[int] = []
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError) as err:
            print(f"zygote: a bad request ({err}): declined", file=sys.stderr, flush=True)
            request = None
        reason = self._decline(request) if request is not None else "a bad request"
        if reason is not None or request is None or len(fds) != 3:
            reason = reason or "no standard streams"
            print(f"zygote: a cold kernel: {reason}", file=sys.stderr, flush=True)
            for fd in fds:
                os.close(fd)
            _send(conn, {"cold": reason})
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the kernel: never returns
            self._become_kernel(conn, request, fds)
        for fd in fds:
            os.close(fd)
        self.kernels[pid] = conn
        _send(conn, {"pid": pid})

    def _decline(self, request: dict[str, Any]) -> str | None:
        if threading.active_count() != 1 or _thread_count() > self.native_threads:
            return f"the zygote runs {_thread_count()} threads"
        if request.get("executable") != sys.executable:
            return f"another interpreter: {request.get('executable')}"
        if request.get("path") != sys.path[1:]:
            return "another sys.path"
        env = request.get("env")
        if not isinstance(env, dict):
            return "a bad request"
        # what torch put in os.environ as the requester imported it, as the preload did here
        theirs = {k: v for k, v in _import_time_env(env).items() if self.added.get(k) != v}
        differ = sorted(k for k in {*theirs, *self.env} if theirs.get(k) != self.env.get(k))
        if differ:
            return f"its environment differs in what is read at import time: {differ}"
        if not isinstance(request.get("argv"), list) or not isinstance(request.get("cwd"), str):
            return "a bad request"
        return None

    def _launcher_gone(self, conn: socket.socket) -> None:
        """The launcher's end closed (it never writes after its request): it was killed, so
        its kernel goes too, as it would have with the process group jupyter_client kills."""
        pid = next((pid for pid, sock in self.kernels.items() if sock is conn), None)
        if pid is None:
            return
        _killpg(pid, signal.SIGKILL)
        # Reaped here (its exit reported to no one, the connection closed): a kernel with much
        # memory takes a while to go, and meanwhile the closed connection stays readable
        # (select would spin) and a new kernel would start beside it.
        deadline = time.monotonic() + KILLED_WAIT_S
        while pid in self.kernels and time.monotonic() < deadline:
            time.sleep(0.01)
            self._reap()

    def _reap(self) -> None:
        while self.kernels:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.kernels.pop(pid, None)
            if conn is not None:
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
                conn.close()

    # --- in the forked child --------------------------------------------------------------------

    def _become_kernel(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        code: Any = 1
        try:
            with contextlib.suppress(OSError, AttributeError):  # killed with the zygote
                ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.setsid()  # its own process group, which the launcher signals
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the zygote's own handler
            self.listener.close()
            for sock in self.kernels.values():
                sock.close()
            conn.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update({**self.added, **request["env"]})
            sys.path[0] = os.getcwd()  # as for `python -m ipykernel_launcher`
            numpy_random = sys.modules.get("numpy.random")
            if numpy_random is not None:  # its global state was seeded in the zygote
                numpy_random.seed()
            import runpy

            sys.argv = ["ipykernel_launcher", *request["argv"]]
            runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as end:
            code = end.code
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        _exit_like_python(code)


def _exit_like_python(code: Any) -> None:
    """End the forked kernel as the interpreter ends: non-daemon threads joined, atexit
    handlers run, streams flushed; without returning into the zygote's loop."""
    import atexit

    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if not isinstance(code, int) and code is not None:
            print(code, file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data = b""
    conn.settimeout(10)
    while not data.endswith(b"\n"):
        chunk, ancdata, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % fds.itemsize
                fds.frombytes(payload[:usable])
        if not chunk:
            raise ValueError("the launcher closed before its request ended")
        data += chunk
    conn.settimeout(None)
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("not an object")
    return request, list(fds)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _killpg(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


#: The kernelspec of a cold kernel, for a notebook that needs one (the browser tests of what
#: importing torch in a cell shows): the stock python3 kernelspec's argv.
COLD_KERNEL = "python3-cold"


def write_kernelspec(folder: str) -> str:
    """``folder/kernels/python3/kernel.json`` whose argv is the launcher, and
    ``folder/kernels/python3-cold`` (always cold); returns folder."""
    for name, argv, display in (
        ("python3", [sys.executable, LAUNCH], "Python 3 (ipykernel)"),
        (COLD_KERNEL, [sys.executable, "-m", "ipykernel_launcher"], "Python 3 (cold)"),
    ):
        spec_dir = os.path.join(folder, "kernels", name)
        os.makedirs(spec_dir, exist_ok=True)
        spec = {
            "argv": [*argv, "-f", "{connection_file}"],
            "display_name": display,
            "language": "python",
            "metadata": {"debugger": True},
            "kernel_protocol_version": "5.5",
        }
        with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
    return folder


def start(
    folder: str, watch_pid: int | None = None, timeout: float = 60
) -> tuple[dict[str, str], Callable[[], None]]:
    """Start a zygote serving from ``folder`` (for as long as ``watch_pid``, default this
    process, runs) and wait until it serves. Returns the environment variables that make
    kernels started from this process and its children warm (set them in ``os.environ``), and
    a function that stops the zygote. Where it did not start, the kernels start cold."""
    # written here, not only by the zygote once torch is imported: a zygote that is late or
    # fails leaves kernelspecs all the same (python3: cold without the socket; python3-cold)
    write_kernelspec(folder)
    watch = str(watch_pid or os.getpid())
    with open(os.path.join(folder, "zygote.log"), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--dir", folder, "--watch-pid", watch],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().strip() if ready else b""
    proc.stdout.close()
    env = {"JUPYTER_PATH": os.pathsep.join(filter(None, [folder, os.environ.get("JUPYTER_PATH")]))}
    if line == b"ready":
        env[SOCKET_ENV] = os.path.join(folder, "zygote.sock")
    else:  # not serving in time: cold kernels, and no zygote left behind
        proc.kill()
        proc.wait()

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    return env, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--dir", help="serve from this folder (the zygote itself)")
    where.add_argument(
        "--start",
        metavar="DIR",
        help="start a zygote serving from DIR in the background, wait until it serves, and "
        "print the environment variables for warm kernels as JSON",
    )
    where.add_argument(
        "--preload",
        action="store_true",
        help="import what a zygote preloads and exit: their bytecode is written then, where "
        "an install left it unwritten (scripts/setup.sh --lazy-bytecode), not at the start "
        "of the zygote that serves",
    )
    parser.add_argument("--watch-pid", type=int)
    args = parser.parse_args()
    if args.preload:
        import importlib

        for name in PRELOAD:
            importlib.import_module(name)
        return
    if args.watch_pid is None:
        parser.error("--watch-pid is required with --dir and --start")
    if args.start:
        env, _stop = start(os.path.abspath(args.start), args.watch_pid)
        print(json.dumps(env))
        return
    folder = os.path.abspath(args.dir)
    import importlib

    os.environ.pop(SOCKET_ENV, None)
    env = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    # The preload's objects live as long as every kernel forked from here: out of the cyclic
    # collector's sight (as Python's docs advise before fork()), a kernel's full collections
    # look at its own objects only. Measured: IPython's exit (displayhook.flush) collects once,
    # 0.24 s of CPU over torch's and torch._dynamo's objects, ~170 kernel exits a run; and no
    # collection in a kernel copies the zygote's pages by writing their GC headers.
    gc.collect()
    gc.freeze()
    write_kernelspec(folder)
    zygote = Zygote(os.path.join(folder, "zygote.sock"), args.watch_pid, env)
    zygote.serve()
    import shutil

    shutil.rmtree(folder, ignore_errors=True)  # the kernelspec, the socket, the log


if __name__ == "__main__":
    main()
