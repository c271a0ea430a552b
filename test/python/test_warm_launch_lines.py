"""The launcher's reading of the zygote's messages (test/warm_kernels/launch.py, ``Lines``):
two messages in one read, a message split over reads, and EOF."""

from __future__ import annotations

import socket

from launch import Lines


def test_two_messages_in_one_read_are_both_returned() -> None:
    # a kernel that ends at once: the zygote's pid and exit lines arrive together
    ours, zygote = socket.socketpair()
    with ours, zygote:
        zygote.sendall(b'{"pid": 41}\n{"exit": -9}\n')
        lines = Lines(ours)
        assert lines.next() == {"pid": 41}
        assert lines.buffered()  # the launcher must not wait on the socket for it
        assert lines.next() == {"exit": -9}
        assert not lines.buffered()


def test_a_message_split_over_reads_and_eof() -> None:
    ours, zygote = socket.socketpair()
    with ours:
        lines = Lines(ours)
        zygote.sendall(b'{"pid"')
        zygote.sendall(b": 7}\n")
        assert lines.next() == {"pid": 7}
        zygote.close()
        assert lines.next() is None
