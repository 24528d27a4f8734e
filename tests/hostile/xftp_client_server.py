"""A hostile FTP server for xftp_client.sh. argv: PORT HOW [LOG]; serves sessions one
after another until killed. HOW:
  drip     the greeting comes a byte every half second
  bounce   PASV names a third host, 127.0.0.9 (the destination of an FTP bounce)
  record   as a copy's source: PORT/EPRT arguments are appended to LOG, RETR answered
  nosize   SIZE refused (502), MLST says size=1000, RETR sends 64 MiB
  blind    no SIZE, no MLST, RETR sends 64 MiB
  deep     MLSD of every directory lists a directory "d" and 4 MiB of lines to skip
  rude     the replies carry terminal escapes; PASS quotes the password back, refused
  plain    RETR sends "hello" (SIZE 5)
  tree     MLSD of d lists a directory "sub", of d/sub a file "keep"; RETR sends "hello"
  modee    PARALLEL offered, SIZE 100; RETR in MODE E sends block [0,100) 20000 times
  overlong SIZE 50, RETR sends 100 bytes
  huge     SIZE 1 TB, RETR sends 64 MiB
  inject   AUTH TLS answered 234 with, in the same segment and in clear, the replies a
           login would want (331, 230, 200, 200): none may be taken as sent under TLS
  changing SIZE 200 and MDTM; the first RETR sends 100 bytes "1" and stops, after which the
           file is 200 bytes "2" with a later MDTM (REST honoured)
"""
import socket
import struct
import sys
import threading

port, how = int(sys.argv[1]), sys.argv[2]
log = sys.argv[3] if len(sys.argv) > 3 else None
listener = socket.create_server(('127.0.0.1', port))
BIG = 64 << 20
FILLER = b'type=OS.unix=x; filler-line-to-skip\r\n'
retrs = 0  # RETRs served, all sessions together: 'changing' changes the file after the first


def session(ctl):
    global retrs
    f = ctl.makefile('rwb', buffering=0)

    def say(text):
        f.write(text.encode('latin-1') + b'\r\n')

    if how == 'drip':
        for byte in b'220 ' + b'x' * 100 + b'\r\n':
            f.write(bytes([byte]))
            threading.Event().wait(0.5)
        return
    say('220 ready')
    data = None
    rest = 0
    streams = 1
    while True:
        line = f.readline()
        if not line:
            return
        verb, _, arg = line.decode('latin-1').strip().partition(' ')
        verb = verb.upper()
        if verb == 'AUTH' and how == 'inject':
            f.write(b'234 go\r\n331 pass\r\n230 in\r\n200 ok\r\n200 ok\r\n')
        elif verb == 'USER':
            say('331 pass')
        elif verb == 'PASS':
            if how == 'rude':
                # a long reply: the error line is full before its copies are hidden
                say('530 \x1b]0;pwned\x07\x1b[2J wrong password: ' + (arg + ' ') * 150)
            else:
                say('230 in')
        elif verb == 'FEAT':
            say('211-feat')
            if how not in ('blind',):
                say(' MLST type*;size*;')
            if how not in ('nosize', 'blind'):
                say(' SIZE')
            if how == 'changing':
                say(' MDTM')
            if how == 'modee':
                say(' PARALLEL')
            say('211 End')
        elif verb == 'PASV':
            data = socket.create_server(('127.0.0.1', 0))
            data.settimeout(3)
            p = data.getsockname()[1]
            host = '127,0,0,9' if how == 'bounce' else '127,0,0,1'
            say('227 Entering Passive Mode (%s,%d,%d)' % (host, p >> 8, p & 255))
        elif verb in ('PORT', 'EPRT'):
            with open(log, 'a') as out:
                out.write(verb + ' ' + arg + '\n')
            say('200 ok')
        elif verb == 'SIZE':
            if how in ('nosize', 'blind'):
                say('502 no SIZE here')
            elif how == 'changing':
                say('213 200')
            elif how == 'modee':
                say('213 100')
            elif how == 'overlong':
                say('213 50')
            elif how == 'huge':
                say('213 %d' % (1 << 40))
            else:
                say('213 5')
        elif verb == 'MDTM' and how == 'changing':
            say('213 2026010%d120000' % (1 if retrs == 0 else 2))
        elif verb == 'OPTS' and 'Parallelism=' in arg:
            streams = int(arg.split('=')[1].split(';')[0].split(',')[0])
            say('200 Parallelism set')
        elif verb == 'RETR' and how == 'modee':
            say('150 here')
            try:
                conns = [data.accept()[0] for _ in range(streams)]
                block = struct.pack('>BQQ', 0, 100, 0) + b'Z' * 100
                conns[0].sendall(block * 20000)
                for k, conn in enumerate(conns):  # EOD on each, EOF naming them on the first
                    conn.sendall(struct.pack('>BQQ', 0x48 if k == 0 else 0x08, 0,
                                             streams if k == 0 else 0))
                    conn.close()
                say('226 done')
            except OSError:
                say('426 gone')
        elif verb == 'REST':
            rest = int(arg)
            say('350 from %d' % rest)
        elif verb == 'MLST':
            say('250-facts')
            if how in ('deep', 'tree'):  # its paths are directories all the way down
                say(' type=dir; %s' % arg)
            else:
                say(' type=file;size=%d; %s' % (1000 if how == 'nosize' else 5, arg))
            say('250 End')
        elif verb in ('RETR', 'STOR') and how in ('record', 'bounce'):
            # a copy: the source never connects anywhere; the destination gives up waiting
            say('150 go')
            if data:
                try:
                    data.accept()[0].close()
                except OSError:
                    pass
            say('226 done')
        elif verb in ('RETR', 'MLSD', 'LIST'):
            say('150 here')
            try:
                conn, _ = data.accept()
                if verb == 'MLSD' and how == 'tree':
                    conn.sendall(b'type=file; keep\r\n' if arg.endswith('sub') else
                                 b'type=dir; sub\r\n')
                elif verb == 'MLSD':
                    conn.sendall(b'type=dir; d\r\n' + FILLER * ((4 << 20) // len(FILLER)))
                elif how == 'overlong':
                    conn.sendall(b'o' * 100)
                elif how == 'changing':
                    conn.sendall(b'1' * 100 if retrs == 0 else (b'2' * 200)[rest:])
                elif how in ('nosize', 'blind', 'huge'):
                    chunk = b'z' * (1 << 20)
                    for _ in range(BIG >> 20):
                        conn.sendall(chunk)
                else:
                    conn.sendall(b'hello')
                conn.close()
                retrs += verb == 'RETR'
                rest = 0
                say('226 done')
            except OSError:
                say('426 gone')
        elif verb == 'QUIT':
            say('221 bye')
            return
        else:
            say('200 ok')


while True:
    ctl, _ = listener.accept()
    try:
        session(ctl)
    except OSError:
        pass
    ctl.close()
