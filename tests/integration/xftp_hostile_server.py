"""A hostile FTP server for xftp_hostile.sh: one session. argv: PORT, then "endless" (a
multi-line greeting that never ends), "tricks" (PASV names a third host, listings carry
terminal escapes and names that climb out with .. or /), "lying-hash" (HASH names a hash
that is not the file's, of argv[3] digits, 64 unless told), "cut" (RETR sends CUT_SENT of
the CUT_SIZE bytes of CUT_DATA and resets the data connection; after REST N it sends the
rest whole), "stall" (RETR sends CUT_SENT bytes, then neither more nor a reply), or, in
MODE E (FEAT says PARALLEL; RETR takes the Parallelism=N connections OPTS asked for),
"far-block" (a block of 5 bytes at 2^40, past the file's CUT_SIZE), "long-block" (a block
at 0 that claims 2^40 bytes) or "repeat-block" (the file's first 64 KiB over and over)."""
import fcntl
import socket
import struct
import sys
import time

CUT_SIZE, CUT_SENT = 200000, 100000
CUT_DATA = bytes(i % 251 for i in range(CUT_SIZE))

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
rest = 0
streams = 1
MODEE_BLOCKS = {'far-block': (1 << 40, 5), 'long-block': (0, 1 << 40),
                'repeat-block': (0, 65536)}


def modee_header(count, offset):
    return struct.pack('>BQQ', 0, count, offset)


def modee_retr(conns):
    """A hostile block on the first connection (forever, for repeat-block), then until the
    client hangs up: it must refuse the block, write nothing past the file and end."""
    offset, count = MODEE_BLOCKS[how]
    try:
        if how == 'repeat-block':
            while True:
                conns[0].sendall(modee_header(count, offset) + CUT_DATA[:count])
        conns[0].sendall(modee_header(count, offset) + b'hello')
        conns[0].recv(1)
    except (BrokenPipeError, ConnectionResetError):
        pass
    for conn in conns:
        conn.close()
    say('426 ended')


def cut_retr(conn):
    """The cut: CUT_SENT bytes, acknowledged (none left in our queue, where a reset would
    drop them), then a reset, which ends the download with an error, not at its end."""
    if rest:
        conn.sendall(CUT_DATA[rest:])
        conn.close()
        say('226 done')
        return
    conn.sendall(CUT_DATA[:CUT_SENT])
    siocoutq = 0x5411  # bytes sent and not yet acknowledged
    while struct.unpack('i', fcntl.ioctl(conn, siocoutq, b'\0' * 4))[0]:
        time.sleep(0.01)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    conn.close()
    say('426 cut')


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
        if how in MODEE_BLOCKS:
            say(' PARALLEL')
        say('211 End')
    elif verb == 'PASV':
        data_listener = socket.create_server(('127.0.0.1', 0))
        p = data_listener.getsockname()[1]
        # Names a third host: the client must connect back to this one.
        say('227 Entering Passive Mode (10,9,9,9,%d,%d)' % (p >> 8, p & 255))
    elif verb == 'OPTS' and arg.upper().startswith('RETR PARALLELISM='):
        streams = int(arg.split('=')[1].split(',')[0].rstrip(';'))
        say('200 ok')
    elif verb == 'RETR' and how in MODEE_BLOCKS:
        say('150 here')
        modee_retr([data_listener.accept()[0] for _ in range(streams)])
    elif verb in ('LIST', 'MLSD', 'RETR'):
        say('150 here')
        conn, _ = data_listener.accept()
        if verb == 'LIST':
            conn.sendall(b'-rw-r--r-- 1 a a 5 Jan 1 2020 \x1b]0;pwned\x07\x1b[2Jname\r\n')
        elif verb == 'MLSD':
            for name in ['../evil', '..', '.', 'a/../../evil2', '/abs-evil', 'ok']:
                conn.sendall(b'type=file;size=5; ' + name.encode() + b'\r\n')
        elif how == 'cut':
            cut_retr(conn)
            continue
        elif how == 'stall':
            conn.sendall(CUT_DATA[:CUT_SENT])
            time.sleep(60)  # neither more data nor a reply
        else:
            conn.sendall(b'hello')
        conn.close()
        say('226 done')
    elif verb == 'REST':
        rest = int(arg)
        say('350 from %d' % rest)
    elif verb == 'HASH' and how == 'lying-hash':
        say('213 SHA-256 0-4 ' + '0' * (int(sys.argv[3]) if len(sys.argv) > 3 else 64))
    elif verb == 'SIZE':
        say('213 %d' % (CUT_SIZE if how in ('cut', 'stall') or how in MODEE_BLOCKS else 5))
    elif verb == 'QUIT':
        say('221 bye')
        break
    else:
        say('200 ok')
