"""A raw FTP control connection for the xftpd_ tests: send any bytes, read replies."""
import socket
import subprocess
import time


def traced(server, login, strace_args):
    """The session that login() opens (it returns a logged-in Ctl) on the server whose
    listener's pid is server, followed by strace with strace_args: (the Ctl, the tracer)."""
    def sessions():
        out = subprocess.run(['pgrep', '-P', str(server)], capture_output=True, text=True).stdout
        return set(out.split())
    before = sessions()
    c = login()
    mine = sessions() - before
    assert len(mine) == 1, 'cannot tell the session from %s' % mine
    pid = mine.pop()
    tracer = subprocess.Popen(['strace'] + strace_args + ['-p', pid])
    for _ in range(100):
        if 'TracerPid:\t0\n' not in open('/proc/%s/status' % pid).read():
            break
        time.sleep(0.05)
    return c, tracer


class Ctl:
    def __init__(self, port, host='127.0.0.1', timeout=20):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b''
        self.expect(220)

    def send(self, data):
        if isinstance(data, str):
            data = data.encode('latin-1')
        if not data.endswith(b'\n'):
            data += b'\r\n'
        self.sock.sendall(data)

    def reply(self):
        """One reply (multi-line ones whole): (code, text)."""
        lines = []
        while True:
            while b'\n' not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise EOFError('closed after %r' % lines)
                self.buf += chunk
            line, self.buf = self.buf.split(b'\n', 1)
            line = line.decode('latin-1').rstrip('\r')
            lines.append(line)
            if len(lines) == 1 and line[3:4] != '-':
                break
            if len(lines) > 1 and line[:3] == lines[0][:3] and line[3:4] == ' ':
                break
        return int(lines[0][:3]), '\n'.join(lines)

    def expect(self, code, data=None):
        if data is not None:
            self.send(data)
        got, text = self.reply()
        if got != code:
            raise AssertionError('%r: expected %d, got %r' % (data, code, text))
        return text

    def login(self, user, password):
        self.expect(331, 'USER ' + user)
        self.expect(230, 'PASS ' + password)

    def closed(self, within=10):
        """Whether the server closes the connection within the time given."""
        self.sock.settimeout(within)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def data(self, command, streams=1):
        """EPSV, then command, with streams data connections: the connections, or the
        refusal's code when command did not answer 150."""
        text = self.expect(229, 'EPSV')
        port = int(text.split('|||')[1].split('|')[0])
        host = self.sock.getpeername()[0]
        conns = [socket.create_connection((host, port), timeout=20) for _ in range(streams)]
        self.send(command)
        code, text = self.reply()
        if code != 150:
            for conn in conns:
                conn.close()
            return code
        return conns

    def pasv_get(self, command):
        """command's data over one connection: (final reply code, bytes)."""
        conns = self.data(command)
        if isinstance(conns, int):
            return conns, b''
        got = b''
        while True:
            chunk = conns[0].recv(1 << 20)
            if not chunk:
                break
            got += chunk
        conns[0].close()
        return self.reply()[0], got

    def pasv_put(self, command, payload, pace=0):
        """Sends payload for command (pace seconds between 64 KiB pieces): the final code."""
        conns = self.data(command)
        if isinstance(conns, int):
            return conns
        try:
            for at in range(0, len(payload), 65536):
                conns[0].sendall(payload[at:at + 65536])
                if pace:
                    time.sleep(pace)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused the rest (a full disk): its reply says why
        conns[0].close()
        return self.reply()[0]

    def modee_put(self, command, payload, streams, block=1 << 20):
        """Sends payload for command in MODE E blocks over streams connections, last
        block first, spread round-robin; then EOF and EODs. The final code."""
        conns = self.data(command, streams)
        if isinstance(conns, int):
            return conns
        offsets = list(range(0, len(payload), block))[::-1]
        for i, off in enumerate(offsets):
            chunk = payload[off:off + block]
            head = bytes([0]) + len(chunk).to_bytes(8, 'big') + off.to_bytes(8, 'big')
            conns[i % streams].sendall(head + chunk)
        conns[0].sendall(bytes([0x40]) + (0).to_bytes(8, 'big') + streams.to_bytes(8, 'big'))
        for conn in conns:
            conn.sendall(bytes([0x08]) + bytes(16))
            conn.close()
        return self.reply()[0]
