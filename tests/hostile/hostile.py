#!/usr/bin/env python3
"""hostile.py: sink against crafted peers (docs/wire.md, "What a sink trusts").

Starts sink (DS_BIN) on free tcp and udp ports and plays each hostile peer in turn:
duplicate run ids and streams, runs that never finish, memory asked for over tcp and
udp, idle connections past the descriptor limit, peers that trickle a byte a second,
absurd END counts and message numbers, hellos cut short, and an echo server for blast.
After each, a normal blast must be served. At the end sink must stop within 2 s of
SIGTERM with status 143, no live-counter segment left and no sanitizer report."""
import atexit
import json
import os
import random
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ["DS_BIN"]
# room for four links of 32 MiB messages (128 MiB each) and the odd small one
MAX_MEM = 576 << 20
running = []  # sinks to end, however the script ends
BIG_LINKS = 4
# udp: each admitted peer holds 64 datagram slots of 64 KiB, and 1 KiB messages 64 KiB more
UDP_SLOT_BYTES = 4 << 20
UDP_SMALL_MEM = 16 << 20
UDP_SMALL_PEERS = 24
checks = 0


def ok(what):
    global checks
    checks += 1
    print(f"ok {checks} - {what}", flush=True)


def fail(what):
    print(f"FAIL: {what}", file=sys.stderr, flush=True)
    sys.exit(1)


def check(b):
    h = 2166136261
    for x in b[:28]:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h


def header(kind, seq, length, session=0):
    b = struct.pack(">HBBIQIII", 0x4453, 1, kind, session, seq, length, 0, length)
    return b + struct.pack(">I", check(b))


def frame(kind, payload, seq=0, session=0):
    return header(kind, seq, len(payload), session) + payload


def hello(msg_size, run_id, streams=1, stream=0, count=0, duration_ms=0, flags=0):
    return frame(2, struct.pack(">IIQIBBHHQII2sB", flags, msg_size, count, duration_ms, 0, 0,
                                streams, stream, run_id, 0, 0, b"\0\0", 0))


def end(messages, nbytes):
    return frame(5, struct.pack(">QQ", messages, nbytes))


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got:
            raise EOFError(f"closed after {len(b)} of {n} bytes")
        b += got
    return b


def read_record(s):
    h = recv_exact(s, 32)
    kind = h[3]
    flen = struct.unpack(">I", h[24:28])[0]
    return kind, recv_exact(s, flen)


def ack_status(payload):
    return struct.unpack(">II", payload[:8])


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Sink:
    def __init__(self, link, *args, nofile=None):
        self.port = free_port(socket.SOCK_STREAM if link == "tcp" else socket.SOCK_DGRAM)
        name = f"sink-{link}-{self.port}"
        self.out = open(os.path.join(WORK, name + ".out"), "w+")
        self.err = open(os.path.join(WORK, name + ".err"), "w+")

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [f"{BIN}/sink", "-x", link, "-p", str(self.port), "-B", "127.0.0.1", "--json",
             "--idle", "2", "--max-mem", str(MAX_MEM), *args],
            stdout=self.out, stderr=self.err, preexec_fn=limits)
        self.link = link
        running.append(self.proc)
        wait_until(lambda: self.listening(), 10, "sink to listen")

    def listening(self):
        if self.proc.poll() is not None:
            fail(f"sink exited: {self.stderr()}")
        proto = "-ltn" if self.link == "tcp" else "-lun"
        out = subprocess.run(["ss", "-H", proto, f"sport = :{self.port}"], capture_output=True,
                             text=True).stdout
        return str(self.port) in out

    def stderr(self):
        self.err.flush()
        with open(self.err.name) as f:
            return f.read()

    def reports(self):
        self.out.flush()
        with open(self.out.name) as f:
            # whole lines only: sink may be writing the last one
            return [json.loads(line) for line in f if line.startswith("{") and line.endswith("\n")]

    def alive(self, what):
        if self.proc.poll() is not None:
            fail(f"sink died after {what}: {self.stderr()}")

    def hwm_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        t0 = time.monotonic()
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("sink did not stop within 5 s of SIGTERM")
        took = time.monotonic() - t0
        if took > 2:
            fail(f"sink took {took:.1f} s to stop")
        if rc != 143:
            fail(f"sink exited {rc} after SIGTERM, not 143")
        if os.path.exists(f"/dev/shm/dragstrip.{self.proc.pid}"):
            fail("sink left its live-counter segment")
        err = self.stderr()
        if "Sanitizer" in err or "runtime error" in err:
            fail(f"sanitizer report:\n{err}")
        ok(f"{self.link} sink stopped in {took:.2f} s by SIGTERM, status 143, clean")


def wait_until(cond, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    fail(f"timed out waiting for {what}")


def normal_blast(sink, what):
    before = len(sink.reports())
    r = subprocess.run([f"{BIN}/blast", "-x", sink.link, "-p", str(sink.port), "-n", "100",
                        "-l", "16K", "--verify", "127.0.0.1"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        fail(f"a normal blast after {what}: {r.stderr.strip()}")

    def clean():
        return [x for x in sink.reports()[before:] if x["messages"] == 100 and not x["aborted"]]

    wait_until(clean, 10, f"a clean report of the normal run after {what}")
    sink.alive(what)
    ok(f"sink serves a normal blast after {what}")


def closed_within(s, seconds):
    """True when the peer closes s within seconds."""
    s.settimeout(seconds)
    try:
        while s.recv(4096):
            pass
        return True
    except (socket.timeout, TimeoutError):
        return False
    except OSError:
        return True


def duplicate_runs(sink):
    run = random.getrandbits(63)
    a, b = connect(sink.port), connect(sink.port)
    a.sendall(hello(4096, run))
    kind, p = read_record(a)
    if kind != 3 or ack_status(p)[0] != 0:
        fail(f"first hello not accepted: {kind} {p.hex()}")
    b.sendall(hello(4096, run))
    kind, p = read_record(b)
    if kind != 3 or ack_status(p)[0] != 6:
        fail(f"a second link on the same run and stream was not refused: {p.hex()}")
    ok("a second link for the same run id and stream is refused (conflict)")
    for seq in range(10):
        a.sendall(frame(1, b"d" * 4096, seq))
    a.sendall(end(10, 10 * 4096))
    kind, p = read_record(a)
    if kind != 6 or struct.unpack(">Q", p[:8])[0] != 10:
        fail(f"no FINAL of 10 after END: {kind} {p.hex()}")
    b.sendall(frame(1, b"d" * 4096, 0))  # the refused link goes on talking
    a.close()
    b.close()
    # the same, racing: both links say hello at once and the first ends at once
    for _ in range(20):
        run = random.getrandbits(63)
        a, b = connect(sink.port), connect(sink.port)
        a.sendall(hello(4096, run) + frame(1, b"d" * 4096, 0) + end(1, 4096))
        b.sendall(hello(4096, run) + frame(1, b"d" * 4096, 0) + end(1, 4096))
        a.close()
        b.close()
    sink.alive("duplicate run ids")
    ok("duplicate run ids and streams, racing, survived")


def partial_run(sink):
    run = random.getrandbits(63)
    before = len(sink.reports())
    a = connect(sink.port)
    a.sendall(hello(4096, run, streams=2, stream=0))
    if ack_status(read_record(a)[1])[0] != 0:
        fail("hello of a two-stream run not accepted")
    for seq in range(5):
        a.sendall(frame(1, b"d" * 4096, seq))
    a.sendall(end(5, 5 * 4096))
    read_record(a)
    a.close()
    # A late report of the racing one-stream runs before may still come: take this run's.
    def half_run():
        return [x for x in sink.reports()[before:] if x["streams"] == 2]

    wait_until(lambda: half_run(), 5, "the half run's report")
    r = half_run()[0]
    if r["streams"] != 2 or r["streams_ended"] != 1 or not r["aborted"] or r["messages"] != 5:
        fail(f"a run of two streams that sent one is reported wrong: {r}")
    ok("a run declaring two streams that sends one is reported (aborted) and freed")


def memory_requests(sink):
    s = connect(sink.port)
    s.sendall(hello(256 << 20, random.getrandbits(63)))
    status, most = ack_status(read_record(s)[1])
    if status != 1 or most != 64 << 20:
        fail(f"256 MiB messages not refused as too big (status {status}, max {most})")
    s.close()
    ok("a hello asking for 256 MiB messages is refused beyond --max-msg 64M")
    held, statuses = [], []
    for _ in range(6):  # 32 MiB messages: 4 buffers each, 128 MiB a link
        s = connect(sink.port)
        s.sendall(hello(32 << 20, random.getrandbits(63)))
        statuses.append(ack_status(read_record(s)[1])[0])
        held.append(s)
    if statuses.count(0) != BIG_LINKS or statuses.count(5) != 6 - statuses.count(0):
        fail(f"the memory budget was not kept: {statuses}")
    hwm = sink.hwm_bytes()
    for s in held:
        s.close()
    ok(f"hellos beyond --max-mem are refused (no memory): {statuses}, peak RSS {hwm >> 20} MiB")
    return hwm


def udp_hellos(sink, msg_size, count):
    """count udp peers each say hello for msg_size messages: their (socket, session)
    pairs and the statuses answered (None: no answer in 3 s)."""
    peers, statuses = [], []
    for _ in range(count):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.connect(("127.0.0.1", sink.port))
        u.settimeout(3)
        session = random.getrandbits(31) + 1
        u.send(frame(2, hello(msg_size, random.getrandbits(63))[32:], session=session))
        try:
            statuses.append(ack_status(u.recv(200)[32:])[0])
        except (socket.timeout, TimeoutError):
            statuses.append(None)
        peers.append((u, session))
    return peers, statuses


def udp_memory(sink):
    peers, statuses = udp_hellos(sink, 32 << 20, 24)
    hwm = sink.hwm_bytes()
    for u, _ in peers:
        u.close()
    if statuses.count(0) > BIG_LINKS:
        fail(f"udp hellos took more than the budget: {statuses}")
    ok(f"24 udp hellos for 32 MiB messages stay in the budget: {statuses.count(0)} taken, "
       f"peak RSS {hwm >> 20} MiB")
    return hwm


def udp_slots(sink):
    """Each admitted udp peer holds 4 MiB of datagram slots whatever its message size:
    small hellos must be refused once those slots would pass --max-mem, not only at
    --max-peers."""
    before = len(sink.reports())
    peers, statuses = udp_hellos(sink, 1024, UDP_SMALL_PEERS)
    hwm = sink.hwm_bytes()
    taken = statuses.count(0)
    # the admitted end their runs (END of nothing), which gives their slots back
    for (u, session), status in zip(peers, statuses):
        if status == 0:
            u.send(frame(5, end(0, 0)[32:], session=session))
    wait_until(lambda: len(sink.reports()) >= before + taken, 10, "the admitted udp runs' reports")
    for u, _ in peers:
        u.close()
    if taken == 0 or taken * (UDP_SLOT_BYTES + 64 * 1024) > UDP_SMALL_MEM:
        fail(f"udp peers' datagram slots were not kept within --max-mem: {statuses}")
    if statuses.count(5) != UDP_SMALL_PEERS - taken:
        fail(f"udp hellos beyond --max-mem not refused for want of memory (5): {statuses}")
    if hwm > UDP_SMALL_MEM + (64 << 20):
        fail(f"sink's peak RSS {hwm >> 20} MiB is well past its budget of "
             f"{UDP_SMALL_MEM >> 20} MiB")
    ok(f"{UDP_SMALL_PEERS} udp hellos for 1 KiB messages: {taken} taken within "
       f"--max-mem {UDP_SMALL_MEM >> 20}M (4 MiB of slots each), the rest refused (no memory); "
       f"peak RSS {hwm >> 20} MiB")


def trickle(sink):
    data = hello(4096, random.getrandbits(63))
    peers = [connect(sink.port) for _ in range(3)]
    t0 = time.monotonic()
    done = []

    def drip(s):
        try:
            for byte in data:
                s.send(bytes([byte]))
                time.sleep(1)
        except OSError:
            pass
        done.append(time.monotonic() - t0)

    threads = [threading.Thread(target=drip, args=(s,), daemon=True) for s in peers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    if len(done) != 3 or max(done) > 6:
        fail(f"peers sending a byte a second were held: {done}")
    ok(f"hellos trickled a byte a second are dropped within {max(done):.1f} s")
    # after a good hello: a data record trickled
    s = connect(sink.port)
    s.sendall(hello(4096, random.getrandbits(63)))
    read_record(s)
    record = frame(1, b"d" * 4096, 0)
    t0 = time.monotonic()
    try:
        for byte in record:
            s.send(bytes([byte]))
            time.sleep(0.2)
            if time.monotonic() - t0 > 10:
                break
    except OSError:
        pass
    took = time.monotonic() - t0
    if took > 6:
        fail(f"a record trickled after the hello held its link {took:.1f} s")
    s.close()
    ok(f"a data record trickled after the hello is given up within {took:.1f} s")


def absurd_claims(sink):
    s = connect(sink.port)
    s.sendall(hello(4096, random.getrandbits(63)))
    read_record(s)
    for seq in range(10):
        s.sendall(frame(1, b"d" * 4096, seq))
    s.sendall(frame(1, b"d" * 4096, 1 << 63))  # a number never sent
    s.sendall(end((1 << 64) - 1, 4096))
    kind, p = read_record(s)
    counts = struct.unpack(">10Q", p)  # FINAL: counts, faults, recv_ns, CPU times
    messages, lost, malformed = counts[0], counts[2], counts[6]
    if kind != 6 or messages != 10 or lost != 0 or malformed < 2:
        fail(f"absurd claims believed: messages {messages} lost {lost} malformed {malformed}")
    s.close()
    ok("END claiming 2^64-1 messages and a message numbered 2^63 are counted, not believed")


def cut_short(sink):
    before = len(sink.reports())
    s = connect(sink.port)
    s.sendall(hello(4096, random.getrandbits(63))[:50])  # a hello cut inside its payload
    s.close()
    time.sleep(0.3)
    normal_blast(sink, "a hello cut short")
    if sum(r["errors"]["malformed"] for r in sink.reports()[before:]) < 1:
        fail(f"a hello cut short was not counted: {sink.reports()[before:]}")
    ok("a hello cut short is counted as malformed")


def idle_flood(sink):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), max(hard, 4096)))
    peers = []
    for _ in range(1100):
        peers.append(socket.create_connection(("127.0.0.1", sink.port), timeout=10))
    sink.alive("1100 idle connections")
    wait_until(lambda: "Too many open files" in sink.stderr(), 10, "the shortage to be logged")
    # the handshake deadline frees them: every one is closed by sink in the end
    deadline = time.monotonic() + 30
    for p in peers:
        if not closed_within(p, max(0.1, deadline - time.monotonic())):
            fail("sink held an idle connection past 30 s")
        p.close()
    logged = sink.stderr().count("Too many open files")
    if logged != 1:
        fail(f"the shortage was logged {logged} times, not once")
    ok("1100 idle connections under ulimit -n 1024: accept survives EMFILE, logged once")


def full_house():
    sink = Sink("tcp", "--max-peers", "2")
    held = [connect(sink.port) for _ in range(2)]
    third = connect(sink.port)
    if not closed_within(third, 2):
        fail("a link beyond --max-peers was not closed at once")
    wait_until(lambda: "as many as it serves at once" in sink.stderr(), 5, "the full house said")
    for s in held:  # the handshake deadline frees both
        if not closed_within(s, 6):
            fail("an idle link was held past the handshake deadline")
    ok("a link beyond --max-peers is closed at once, and said once")
    normal_blast(sink, "a full house")
    sink.stop()


def echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=lambda c=c: [c.sendall(b) for b in iter(
                lambda: c.recv(65536), b"")], daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def blast_at_echo():
    port = echo_server()
    t0 = time.monotonic()
    r = subprocess.run([f"{BIN}/blast", "-p", str(port), "-w", "20", "127.0.0.1"],
                       capture_output=True, text=True, timeout=30)
    took = time.monotonic() - t0
    if r.returncode != 1 or "echo" not in r.stderr or took > 5:
        fail(f"blast at an echo server: status {r.returncode} in {took:.1f} s: {r.stderr}")
    ok(f"blast sees an echo server for what it is in {took:.2f} s: {r.stderr.strip()}")


def lying_sink(final_of):
    """A tcp sink that takes one blast stream and answers its END with the FINAL payload
    final_of(messages, bytes) makes of blast's own counts. Returns its port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        srv.close()
        with c:
            c.settimeout(20)
            read_record(c)  # the hello
            c.sendall(frame(3, struct.pack(">IIIB", 0, 64 << 20, 16, 0)))
            while True:
                kind, p = read_record(c)
                if kind == 5:
                    c.sendall(frame(6, final_of(*struct.unpack(">QQ", p[:16]))))
                    break
            closed_within(c, 20)

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def final(messages, nbytes, lost=0, dup=0, reordered=0, corrupt=0):
    return struct.pack(">8Q", messages, nbytes, lost, dup, reordered, corrupt, 0, 1000000)


def blast_checks_final():
    """blast holds the sink's FINAL against what it sent: counts that cannot be are a
    protocol error it names, not figures it prints."""
    size = 4096
    cases = [("honest", lambda m, b: final(m, b), None),
             ("honest, with duplicates", lambda m, b: final(m + 3, b + 3 * size, dup=3), None),
             ("more received than sent", lambda m, b: final(m + 5, b + 5 * size),
              "more messages received than were sent"),
             ("more bytes than its messages hold", lambda m, b: final(m, b + 1),
              "more bytes than its messages hold"),
             ("2^64-1 lost", lambda m, b: final(m, b, lost=2**64 - 1),
              "more messages lost than were sent"),
             ("2^63 corrupt", lambda m, b: final(m, b, corrupt=2**63),
              "reordered or corrupt than received")]
    for what, final_of, error in cases:
        port = lying_sink(final_of)
        r = subprocess.run([f"{BIN}/blast", "-p", str(port), "-n", "100", "-l", str(size),
                            "--json", "127.0.0.1"], capture_output=True, text=True, timeout=30)
        if error is None:
            if r.returncode != 0:
                fail(f"blast refused a sink's {what} counts: {r.stderr.strip()}")
            report = json.loads(r.stdout.splitlines()[-1])
            if report["messages"] != 100 or report["sink"]["messages"] < 100:
                fail(f"blast's report of a sink's {what} counts: {r.stdout.strip()}")
            ok(f"blast reports a sink's {what} FINAL")
            continue
        lines = r.stderr.strip().splitlines()
        if r.returncode != 1 or len(lines) != 1 or error not in lines[0] or r.stdout:
            fail(f"blast against a sink's {what}: status {r.returncode}, stdout "
                 f"{r.stdout.strip()!r}, stderr {r.stderr.strip()!r}")
        ok(f"a sink's FINAL claiming {what}: no report, one line, status 1")
    print(f"  e.g. {lines[0]}", flush=True)


def main():
    global WORK
    WORK = tempfile.mkdtemp(prefix="ds-hostile.")
    atexit.register(shutil.rmtree, WORK, ignore_errors=True)
    atexit.register(lambda: [p.kill() for p in running if p.poll() is None])
    blast_at_echo()
    blast_checks_final()
    tcp = Sink("tcp", "--max-peers", "2000", nofile=1024)
    normal_blast(tcp, "start")
    duplicate_runs(tcp)
    normal_blast(tcp, "duplicate run ids")
    partial_run(tcp)
    normal_blast(tcp, "a run that never completes")
    hwm = memory_requests(tcp)
    normal_blast(tcp, "memory requests")
    trickle(tcp)
    normal_blast(tcp, "trickling peers")
    absurd_claims(tcp)
    normal_blast(tcp, "absurd claims")
    cut_short(tcp)
    idle_flood(tcp)
    normal_blast(tcp, "1100 idle connections")
    tcp.stop()
    full_house()
    udp = Sink("udp", "--idle", "30")  # links taken stay taken while the test runs
    normal_blast(udp, "start")
    hwm = max(hwm, udp_memory(udp))
    normal_blast(udp, "udp memory requests")
    udp.stop()
    small = Sink("udp", "--idle", "30", "--max-mem", str(UDP_SMALL_MEM))
    udp_slots(small)
    normal_blast(small, "udp peers past the budget by their datagram slots")
    small.stop()
    if hwm > MAX_MEM * 3 // 2 + (128 << 20):
        fail(f"sink's peak RSS {hwm >> 20} MiB is well past its budget of {MAX_MEM >> 20} MiB")
    print(f"PASS hostile: {checks} checks (peak sink RSS {hwm >> 20} MiB, budget "
          f"{MAX_MEM >> 20} MiB)")


if __name__ == "__main__":
    main()
