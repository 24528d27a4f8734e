"""An FTP server for xftp_writeback_error.sh, any number of sessions. argv: PORT, FILE. It
serves one directory, t: a file y (1 MiB, from a seeded generator) and 1024 files of one
byte. y's 226 comes only once every small file has been sent and a while more has passed,
and FILE is removed just before it."""
import os
import random
import socket
import socketserver
import sys
import threading
import time

port, gone = int(sys.argv[1]), sys.argv[2]
small = ['f%04d' % i for i in range(1024)]
files = {'y': random.Random(7).randbytes(1 << 20)}
files.update({name: b'x' for name in small})
sent = 0
lock = threading.Lock()


class Session(socketserver.StreamRequestHandler):
    def say(self, text):
        self.wfile.write(text.encode() + b'\r\n')

    def handle(self):
        global sent
        data = None
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.say('220 ready')
        for line in self.rfile:
            verb, _, arg = line.decode().strip().partition(' ')
            verb = verb.upper()
            if verb == 'USER':
                self.say('331 pass')
            elif verb == 'PASS':
                self.say('230 in')
            elif verb == 'FEAT':
                self.say('211-feat\r\n MLST type*;size*;\r\n SIZE\r\n211 End')
            elif verb == 'PASV':
                data = socket.create_server(('127.0.0.1', 0))
                p = data.getsockname()[1]
                self.say('227 here (127,0,0,1,%d,%d)' % (p >> 8, p & 255))
            elif verb in ('MLSD', 'RETR'):
                self.say('150 here')
                conn, _ = data.accept()
                name = arg.rsplit('/', 1)[-1]
                if verb == 'MLSD':
                    conn.sendall(b''.join(b'type=file;size=%d; %s\r\n' % (len(files[n]), n.encode())
                                          for n in files))
                else:
                    conn.sendall(files[name])
                conn.close()
                data.close()
                if name == 'y':
                    while sent < len(small):
                        time.sleep(0.05)
                    time.sleep(1.5)  # the batch of the small files flushed meanwhile
                    os.unlink(gone)
                elif verb == 'RETR':
                    with lock:
                        sent += 1
                self.say('226 done')
            elif verb == 'SIZE':
                name = arg.rsplit('/', 1)[-1]
                self.say('213 %d' % len(files[name]) if name in files else '550 no')
            elif verb == 'QUIT':
                self.say('221 bye')
                return
            elif verb in ('TYPE', 'MODE', 'OPTS', 'NOOP'):
                self.say('200 ok')
            else:
                self.say('502 not here')


socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
socketserver.ThreadingTCPServer(('127.0.0.1', port), Session).serve_forever()
