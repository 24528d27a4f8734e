#!/usr/bin/env python3
"""A UDP sender of hand-picked sequence numbers, for ttcp's loss accounting tests.

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
    if argv[1] == "sendseq":
        trailer = int(argv[argv.index("--trailer") + 1]) if "--trailer" in argv else None
        seqs = [int(s) for s in argv[4].split(",")]
        sendseq(argv[2], int(argv[3]), seqs, "--no-end" not in argv, trailer)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
