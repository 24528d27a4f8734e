#!/usr/bin/env python3
"""A peer that speaks and prints as the SGI-modified classic ttcp (1991) did, for tests.

usage: classic_ttcp.py -t [-s] [-u] [-v] [-l LEN] [-n NBUF] [-p PORT] HOST
       classic_ttcp.py -r [-s] [-u] [-v] [-l LEN] [-p PORT]

Over TCP a plain byte stream; over UDP a 4-byte datagram before the data and four after
it, the receiver starting at the first datagram of 4 bytes or less and ending at the
next. Progress lines go to stderr; the banner and the closing lines go to stdout, laid
out as classic laid them out (msec/call with its factor of 1024, the %#x buffer address).
Without -s the transmitter sends stdin and the receiver writes stdout, as classic did
(its lines then share stdout with the data, as classic's did).
"""
import getopt
import os
import resource
import socket
import sys
import time


def pattern(length):
    """Classic's source pattern: the printable ASCII characters, cycling."""
    out, c = bytearray(), 0
    while len(out) < length:
        while not chr(c & 0x7F).isprintable():
            c += 1
        out.append(c & 0x7F)
        c += 1
    return bytes(out)


class Classic:
    def __init__(self, argv):
        opts, args = getopt.getopt(argv, "trsuvl:n:p:")
        flags = dict(opts)
        self.trans = "-t" in flags
        self.sink = "-s" in flags
        self.udp = "-u" in flags
        self.verbose = "-v" in flags
        self.buflen = int(flags.get("-l", 8192))
        self.nbuf = int(flags.get("-n", 2048))
        self.port = int(flags.get("-p", 5001))
        self.host = args[0] if self.trans else None
        self.side = "ttcp-t" if self.trans else "ttcp-r"
        self.nbytes = 0
        self.calls = 0

    def mes(self, text):
        print(f"{self.side}: {text}", file=sys.stderr, flush=True)

    def out(self, text):
        sys.stdout.write(f"{self.side}: {text}\n")
        sys.stdout.flush()

    def banner(self):
        line = (f"buflen={self.buflen}, nbuf={self.nbuf}, align=16384/0, port={self.port}"
                f"  {'udp' if self.udp else 'tcp'}")
        self.out(line + (f"  -> {self.host}" if self.trans else ""))

    def start_timer(self):
        self.t0 = time.monotonic()
        self.ru0 = resource.getrusage(resource.RUSAGE_SELF)

    def results(self):
        realt = time.monotonic() - self.t0
        ru = resource.getrusage(resource.RUSAGE_SELF)
        user, sys_ = ru.ru_utime - self.ru0.ru_utime, ru.ru_stime - self.ru0.ru_stime
        cput = user + sys_
        realt = realt if realt > 0 else 0.001
        cput = cput if cput > 0 else 0.001
        self.out(f"{self.nbytes} bytes in {realt:.2f} real seconds = "
                 f"{self.nbytes / realt / 1024:.2f} KB/sec +++")
        if self.verbose:
            self.out(f"{self.nbytes} bytes in {cput:.2f} CPU seconds = "
                     f"{self.nbytes / cput / 1024:.2f} KB/cpu sec")
        self.out(f"{self.calls} I/O calls, msec/call = "
                 f"{1024.0 * realt / max(self.calls, 1):.2f}, calls/sec = {self.calls / realt:.2f}")
        minutes = int(realt) // 60
        self.out(f"{user:.1f}user {sys_:.1f}sys {minutes}:{int(realt) % 60:02d}real "
                 f"{int(100 * cput / realt)}% 0i+0d {ru.ru_maxrss}maxrss "
                 f"{ru.ru_majflt}+{ru.ru_minflt}pf {ru.ru_nvcsw}+{ru.ru_nivcsw}csw")
        if self.verbose:
            self.out(f"buffer address {id(self):#x}")

    def transmit(self):
        kind = socket.SOCK_DGRAM if self.udp else socket.SOCK_STREAM
        sock = socket.socket(socket.AF_INET, kind)
        self.mes("socket")
        sock.connect((self.host, self.port))
        if not self.udp:
            self.mes("connect")
        buf = pattern(self.buflen)
        self.start_timer()
        if self.udp:
            sock.send(buf[:4])  # the start sentinel
        if self.sink:
            for _ in range(self.nbuf):
                self.nbytes += sock.send(buf)
                self.calls += 1
                if self.udp:
                    time.sleep(0.0005)  # a receiver on loopback must keep up
        else:
            while True:
                chunk = os.read(0, self.buflen)
                if not chunk:
                    break
                sock.sendall(chunk)
                self.nbytes += len(chunk)
                self.calls += 1
        if self.udp:
            for _ in range(4):
                try:
                    sock.send(buf[:4])
                except ConnectionRefusedError:
                    pass  # the receiver left after the first end sentinel, as it may
                time.sleep(0.002)
        sock.close()
        self.results()

    def receive(self):
        kind = socket.SOCK_DGRAM if self.udp else socket.SOCK_STREAM
        sock = socket.socket(socket.AF_INET, kind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.settimeout(60)
        self.mes("socket")
        if self.udp:
            conn, going = sock, False
        else:
            sock.listen(1)
            conn, peer = sock.accept()
            conn.settimeout(60)
            self.mes(f"accept from {peer[0]}")
            self.start_timer()
        while True:
            data = conn.recv(self.buflen if not self.udp else 65536)
            self.calls += 1
            if self.udp and len(data) <= 4:
                if going:
                    break
                going = True
                self.start_timer()
                continue
            if not data:
                break
            self.nbytes += len(data)
            if not self.sink:
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
        self.results()


def main(argv):
    peer = Classic(argv)
    peer.banner()
    peer.transmit() if peer.trans else peer.receive()


if __name__ == "__main__":
    main(sys.argv[1:])
