"""A test kernelspec's ``argv``: start an IPython kernel forked from the warm-kernel zygote.

The test suites point kernelspec ``python3`` at this script (``test/warm_kernels/zygote.py``
says why and how). It stands in for the kernel towards jupyter_client: it hands its own
arguments, environment, working directory and standard streams to the zygote, which forks a
kernel from a process that has already imported torch; it passes on every signal
jupyter_client sends (interrupt, terminate) to that kernel's process group, and exits with the
kernel's exit status. Killed, it takes the kernel with it (the zygote sees it go).

Where the zygote is not there (``VRAMSCOPE_WARM_KERNELS`` unset or its socket gone), where the
kernel's environment asks for a cold kernel (``VRAMSCOPE_COLD_KERNEL=1``) or differs from the
zygote's in anything read at import time, it becomes an ordinary ``python -m
ipykernel_launcher`` (exec, same pid): a cold kernel, exactly as the stock kernelspec starts.
Only the standard library is imported here, so that this step costs ~20 ms.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import sys

#: The environment variable that names the zygote's socket.
SOCKET_ENV = "VRAMSCOPE_WARM_KERNELS"
#: Set to 1 in a kernel's environment for a cold kernel all the same.
COLD_ENV = "VRAMSCOPE_COLD_KERNEL"
#: The signals passed on to the kernel (what jupyter_client and users send a kernel).
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


def cold(args: list[str]) -> None:
    """Become the stock kernel: ``python -m ipykernel_launcher <args>`` (no return)."""
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *args])


class Lines:
    """The zygote's messages on a connection, one JSON object a line. Two can come in one
    ``recv`` (a kernel that ends at once: ``{"pid": ...}`` then ``{"exit": ...}``); what is
    read past a line is kept for the next."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self._buffer = b""

    def buffered(self) -> bool:
        """Whether a whole message is read already (``select`` on the socket would not say)."""
        return b"\n" in self._buffer

    def next(self) -> dict[str, object] | None:
        """The next message; None at EOF."""
        while b"\n" not in self._buffer:
            chunk = self.conn.recv(4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        return message if isinstance(message, dict) else None


def main(args: list[str]) -> int:
    path = os.environ.get(SOCKET_ENV, "")
    if not path or os.environ.get(COLD_ENV) == "1":
        cold(args)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        cold(args)
    request = json.dumps(
        {
            "argv": args,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "executable": sys.executable,
            "path": sys.path[1:],
        }
    )
    fds = array.array("i", [0, 1, 2])
    conn.sendmsg([request.encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    lines = Lines(conn)
    reply = lines.next()
    if reply is None or not isinstance(reply.get("pid"), int):
        # The zygote declined (an environment it cannot serve) or is gone: a cold kernel.
        why = reply.get("cold") if reply else "the zygote closed"
        print(f"[warm kernels] a cold kernel: {why}", file=sys.stderr, flush=True)
        conn.close()
        cold(args)
    assert reply is not None
    pid = int(reply["pid"])  # type: ignore[call-overload]

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signum)  # the kernel leads its own process group

    for signum in FORWARDED:
        signal.signal(signum, forward)
    # As ipykernel's parent poller ends a cold kernel whose parent died (a server killed with
    # its process group), so the launcher ends the warm one when it is left an orphan.
    parent = os.getppid()
    while not lines.buffered() and not select.select([conn], [], [], 1.0)[0]:
        if os.getppid() != parent:
            forward(signal.SIGKILL, None)
    ended = lines.next()  # {"exit": status} once the kernel has ended; EOF: it has
    code = ended.get("exit") if ended else None
    if not isinstance(code, int):
        return 1
    if code < 0:  # ended by a signal: end by the same one
        if -code in FORWARDED:
            signal.signal(-code, signal.SIG_DFL)  # not passed on to the ended kernel
        os.kill(os.getpid(), -code)
        return 128 - code  # a signal whose default is not to end a process
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
