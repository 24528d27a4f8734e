"""A raw FTP control connection for the xftpd_ tests: send any bytes, read replies."""
import socket
import time


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

    def pasv_get(self, command):
        """EPSV, then command over the data connection: (final reply code, bytes)."""
        text = self.expect(229, 'EPSV')
        port = int(text.split('|||')[1].split('|')[0])
        data = socket.create_connection((self.sock.getpeername()[0], port), timeout=20)
        self.send(command)
        code, text = self.reply()
        if code != 150:
            data.close()
            return code, b''
        got = b''
        while True:
            chunk = data.recv(1 << 20)
            if not chunk:
                break
            got += chunk
        data.close()
        return self.reply()[0], got

    def pasv_put(self, command, payload, pace=0):
        """EPSV, then command sending payload (pace seconds between 64 KiB pieces)."""
        text = self.expect(229, 'EPSV')
        port = int(text.split('|||')[1].split('|')[0])
        data = socket.create_connection((self.sock.getpeername()[0], port), timeout=20)
        self.send(command)
        code, text = self.reply()
        if code != 150:
            data.close()
            return code
        for at in range(0, len(payload), 65536):
            data.sendall(payload[at:at + 65536])
            if pace:
                time.sleep(pace)
        data.close()
        return self.reply()[0]
