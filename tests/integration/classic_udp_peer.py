#!/usr/bin/env python3
"""A UDP peer that behaves as classic ttcp did, for interop tests.

recv PORT                     classic receiver: the first datagram of 4 bytes or less
                              starts the run, the next one ends it; prints BYTES DATAGRAMS
send HOST PORT COUNT LEN      classic sender: a 4-byte sentinel, COUNT datagrams of LEN
                              bytes, four 4-byte sentinels
sendseq HOST PORT SEQS [--no-end] [--trailer N]
                              datagrams carrying dragstrip's sequence header with the
                              comma-separated sequence numbers SEQS, then (unless
                              --no-end) the end sentinels, each followed by a trailer
                              saying N were sent when --trailer is given
"""
import socket
import struct
import sys
import time

DATA_MAGIC = 0x44535454
TRAILER_MAGIC = 0x44535445


def recv(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", port))
    sock.settimeout(20)
    going, nbytes, datagrams = False, 0, 0
    while True:
        data = sock.recv(65536)
        if len(data) <= 4:
            if going:
                break
            going = True
            continue
        nbytes += len(data)
        datagrams += 1
    print(nbytes, datagrams)


def send(host, port, count, length):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((host, port))
    sock.send(b"ttcp")
    payload = bytes(range(256)) * (length // 256 + 1)
    for _ in range(count):
        sock.send(payload[:length])
        time.sleep(0.0005)  # a classic sender on loopback must not outrun the receiver
    for _ in range(4):
        try:
            sock.send(b"ttcp")
        except ConnectionRefusedError:
            pass  # the receiver has left after the first end sentinel, as it may
        time.sleep(0.002)


def sendseq(host, port, seqs, end, trailer):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((host, port))
    sock.send(b"ttcp")
    for seq in seqs:
        sock.send(struct.pack(">IB3xQ", DATA_MAGIC, 1, seq) + bytes(1000))
        time.sleep(0.0005)
    if not end:
        return
    for _ in range(4):
        try:
            sock.send(b"ttcp")
            if trailer is not None:
                sock.send(struct.pack(">IB3xQQ", TRAILER_MAGIC, 1, trailer, trailer * 1016))
        except ConnectionRefusedError:
            pass  # the receiver has left after the first end sentinel, as it may
        time.sleep(0.002)


def main(argv):
    if argv[1] == "recv":
        recv(int(argv[2]))
    elif argv[1] == "send":
        send(argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
    elif argv[1] == "sendseq":
        trailer = int(argv[argv.index("--trailer") + 1]) if "--trailer" in argv else None
        seqs = [int(s) for s in argv[4].split(",")]
        sendseq(argv[2], int(argv[3]), seqs, "--no-end" not in argv, trailer)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
