"""A hostile FTP server for xftp_hostile.sh: one session. argv: PORT, then "endless" (a
multi-line greeting that never ends), "tricks" (PASV names a third host, listings carry
terminal escapes and names that climb out with .. or /) or "lying-hash" (HASH names a hash
that is not the file's)."""
import socket
import sys

port, how = int(sys.argv[1]), sys.argv[2]
listener = socket.create_server(('127.0.0.1', port))
ctl, _ = listener.accept()
f = ctl.makefile('rwb', buffering=0)


def say(text):
    f.write(text.encode('latin-1') + b'\r\n')


if how == 'endless':
    say('220-hello')
    try:
        while True:
            f.write(b'220-more and more\r\n')
    except (BrokenPipeError, ConnectionResetError):
        sys.exit(0)
say('220 ready')
data_listener = None
while True:
    line = f.readline()
    if not line:
        break
    verb, _, arg = line.decode('latin-1').strip().partition(' ')
    verb = verb.upper()
    if verb == 'USER':
        say('331 pass')
    elif verb == 'PASS':
        say('230 in')
    elif verb == 'FEAT':
        say('211-feat')
        say(' MLST type*;size*;')
        say(' SIZE')
        if how == 'lying-hash':
            say(' HASH SHA-256*')
        say('211 End')
    elif verb == 'PASV':
        data_listener = socket.create_server(('127.0.0.1', 0))
        p = data_listener.getsockname()[1]
        # Names a third host: the client must connect back to this one.
        say('227 Entering Passive Mode (10,9,9,9,%d,%d)' % (p >> 8, p & 255))
    elif verb in ('LIST', 'MLSD', 'RETR'):
        say('150 here')
        conn, _ = data_listener.accept()
        if verb == 'LIST':
            conn.sendall(b'-rw-r--r-- 1 a a 5 Jan 1 2020 \x1b]0;pwned\x07\x1b[2Jname\r\n')
        elif verb == 'MLSD':
            for name in ['../evil', '..', '.', 'a/../../evil2', '/abs-evil', 'ok']:
                conn.sendall(b'type=file;size=5; ' + name.encode() + b'\r\n')
        else:
            conn.sendall(b'hello')
        conn.close()
        say('226 done')
    elif verb == 'HASH' and how == 'lying-hash':
        say('213 SHA-256 0-4 ' + '0' * 64)
    elif verb == 'SIZE':
        say('213 5')
    elif verb == 'QUIT':
        say('221 bye')
        break
    else:
        say('200 ok')
