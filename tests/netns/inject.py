#!/usr/bin/env python3
"""inject.py raw IFACE MAC | udp HOST PORT | tcp HOST PORT

Sends sink one of every kind of malformed frame (docs/wire.md) over the given link and
prints how many it sent, each of which sink must count as malformed. tcp cannot carry on
after a bad record, so there every frame goes on a connection of its own."""
import socket
import struct
import sys


def check(b):
    h = 2166136261
    for x in b[:28]:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h


def header(kind, session, seq, msg_len, off, flen, magic=0x4453, version=1):
    b = struct.pack(">HBBIQIII", magic, version, kind, session, seq, msg_len, off, flen)
    return b + struct.pack(">I", check(b))


def junk():
    session = 0x7E57AB1E  # no blast ever chose it
    good = header(1, session, 0, 100, 0, 100) + b"x" * 100
    # the bad hello below opens a link for its session on udp and raw; the stray data
    # must not belong to it
    stray = header(1, session + 1, 0, 100, 0, 100) + b"x" * 100
    bad_check = bytearray(good)
    bad_check[9] ^= 0xFF
    hello_garbage = b"\x00" * 7
    return [
        b"\x01\x02\x03",                                     # shorter than a header
        header(1, session, 0, 100, 0, 100, magic=0xBEEF) + b"x" * 100,
        header(1, session, 0, 100, 0, 100, version=9) + b"x" * 100,
        header(0, session, 0, 100, 0, 100) + b"x" * 100,     # type 0
        header(77, session, 0, 100, 0, 100) + b"x" * 100,    # type 77
        bytes(bad_check),
        header(1, session, 0, 100, 0, 500) + b"x" * 100,     # fragment longer than sent
        header(1, session, 0, 100, 0xFFFFFFC0, 64) + b"x" * 64,  # offset wraps
        header(4, session, 0, 500, 0, 500) + b"c" * 500,     # control frame too big
        header(2, session, 0, 7, 0, 7) + hello_garbage,      # a hello that is no hello
        stray,                                               # data for no session
    ]


def raw(iface, mac):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    src = s.getsockname()[4]
    dst = bytes(int(x, 16) for x in mac.split(":"))
    frames = junk()
    frames.append(b"")  # an Ethernet header and nothing of ours
    for f in frames:
        s.send(dst + src + struct.pack(">H", 0x88B5) + f)
    return len(frames)


def udp(host, port):
    # A socket per frame: sink gives the peer of a hello (even a bad one) a socket of its
    # own for a moment, and what else that peer sends meanwhile goes there.
    frames = junk()
    for f in frames:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(f, (host, port))
        s.close()
    return len(frames)


def tcp(host, port):
    # "a hello that is no hello" is a well-formed record whose payload sink refuses as a
    # control message; "data for no session" is well-formed on a stream (tcp has no
    # sessions) but data before a hello, so both count too.
    frames = junk()
    for f in frames:
        c = socket.create_connection((host, port), timeout=5)
        c.sendall(f)
        c.shutdown(socket.SHUT_WR)
        c.recv(1)  # until sink closes: it has judged the record
        c.close()
    return len(frames)


def main():
    kind = sys.argv[1]
    if kind == "raw":
        n = raw(sys.argv[2], sys.argv[3])
    elif kind == "udp":
        n = udp(sys.argv[2], int(sys.argv[3]))
    else:
        n = tcp(sys.argv[2], int(sys.argv[3]))
    print(n)


main()
