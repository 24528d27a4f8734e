# curl, lftp, wget and Python's ftplib use xftpd unchanged: get, put, list, resume, rename,
# delete, mkdir, passive and active data connections, IPv4 and IPv6.
source "$(dirname "$0")/xftpd_lib.sh"
port=16401
make_store
put_file f.bin 3000000
start_xftpd "$port"
url="ftp://$user:s3cret%20pass@127.0.0.1:$port"
url6="ftp://$user:s3cret%20pass@[::1]:$port"

# curl
curl -sS "$url/" >"$work/list" || fail "curl LIST"
grep -q ' 3000000 .* f.bin' "$work/list" || fail "curl LIST lacks f.bin: $(cat "$work/list")"
pass "curl lists"
curl -sS "$url/f.bin" -o "$work/c1" && same "$work/root/f.bin" "$work/c1" "curl get, passive IPv4"
curl -sS -P 127.0.0.1 "$url/f.bin" -o "$work/c2" && same "$work/root/f.bin" "$work/c2" "curl get, active IPv4 (EPRT)"
curl -sS --disable-eprt -P 127.0.0.1 "$url/f.bin" -o "$work/c3" &&
	same "$work/root/f.bin" "$work/c3" "curl get, active IPv4 (PORT)"
curl -sS --disable-epsv "$url/f.bin" -o "$work/c4" && same "$work/root/f.bin" "$work/c4" "curl get, PASV"
curl -sS -g "$url6/f.bin" -o "$work/c5" && same "$work/root/f.bin" "$work/c5" "curl get, passive IPv6"
curl -sS -g -P ::1 "$url6/f.bin" -o "$work/c6" && same "$work/root/f.bin" "$work/c6" "curl get, active IPv6"
curl -sS -T "$work/c1" "$url/up.bin" || fail "curl put"
same "$work/c1" "$work/root/up.bin" "curl put"
head -c 1234567 "$work/root/f.bin" >"$work/c7"
curl -sS -C - "$url/f.bin" -o "$work/c7" && same "$work/root/f.bin" "$work/c7" "curl resumes a get"
head -c 1000000 "$work/c1" >"$work/half"
curl -sS -T "$work/half" "$url/r.bin" || fail "curl put of a first part"
curl -sS -C - -T "$work/c1" "$url/r.bin" || fail "curl resumed put"
same "$work/c1" "$work/root/r.bin" "curl resumes a put (SIZE, APPE)"
curl -sS -Q "RNFR up.bin" -Q "RNTO moved.bin" "$url/" >/dev/null || fail "curl rename"
[ -f "$work/root/moved.bin" ] && [ ! -e "$work/root/up.bin" ] || fail "curl rename: not moved"
pass "curl renames"
curl -sS -Q "DELE moved.bin" "$url/" >/dev/null || fail "curl delete"
[ ! -e "$work/root/moved.bin" ] || fail "curl delete: still there"
pass "curl deletes"
curl -sS --ftp-create-dirs -T "$work/half" "$url/new/sub/x.bin" || fail "curl mkdir"
same "$work/half" "$work/root/new/sub/x.bin" "curl creates directories"

# lftp
lftp_run() {
	timeout 60 lftp -c "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 10; $1" \
		>"$work/lftp.out" 2>&1 || fail "lftp: $1: $(cat "$work/lftp.out")"
}
lftp_run "open -u $user,'$pass' ftp://127.0.0.1:$port; cls -l; get f.bin -o $work/l1"
grep -q f.bin "$work/lftp.out" || fail "lftp ls lacks f.bin"
same "$work/root/f.bin" "$work/l1" "lftp get, passive"
lftp_run "set ftp:passive-mode off; open -u $user,'$pass' ftp://127.0.0.1:$port; get f.bin -o $work/l2"
same "$work/root/f.bin" "$work/l2" "lftp get, active"
lftp_run "open -u $user,'$pass' ftp://[::1]:$port; put $work/l1 -o l.bin; mkdir d; mv l.bin d/m.bin"
same "$work/l1" "$work/root/d/m.bin" "lftp put, mkdir, mv over IPv6"
head -c 700000 "$work/root/f.bin" >"$work/l3"
lftp_run "open -u $user,'$pass' ftp://127.0.0.1:$port; get -c f.bin -o $work/l3"
same "$work/root/f.bin" "$work/l3" "lftp resumes a get (REST)"
head -c 500000 "$work/l1" >"$work/l4"
lftp_run "open -u $user,'$pass' ftp://127.0.0.1:$port; put $work/l4 -o rp.bin"
lftp_run "open -u $user,'$pass' ftp://127.0.0.1:$port; put -c $work/l1 -o rp.bin"
same "$work/l1" "$work/root/rp.bin" "lftp resumes a put (REST, STOR)"
lftp_run "open -u $user,'$pass' ftp://127.0.0.1:$port; rm d/m.bin; rmdir d"
[ ! -e "$work/root/d" ] || fail "lftp rm, rmdir: d is still there"
pass "lftp rm, rmdir"

# wget
wget -q "$url/f.bin" -O "$work/w1" && same "$work/root/f.bin" "$work/w1" "wget get"
head -c 999 "$work/root/f.bin" >"$work/w2"
(cd "$work" && wget -q -c "$url/f.bin" -O w2) && same "$work/root/f.bin" "$work/w2" "wget -c resumes"

# Python ftplib, passive and active, IPv4 and IPv6
for host in 127.0.0.1 ::1; do
	ftplib "$port" "$host" <<'PY' || fail "ftplib against $host"
for passive in (True, False):
    ftp.set_pasv(passive)
    got = io.BytesIO()
    ftp.retrbinary('RETR f.bin', got.write)
    assert got.getvalue() == open(work + '/root/f.bin', 'rb').read(), 'RETR differs'
    tail = io.BytesIO()
    ftp.retrbinary('RETR f.bin', tail.write, rest=2999000)
    assert tail.getvalue() == got.getvalue()[2999000:], 'REST + RETR differs'
    name = 'py-%s.bin' % passive
    ftp.storbinary('STOR ' + name, io.BytesIO(got.getvalue()[:123457]))
    assert ftp.size(name) == 123457
    assert name in ftp.nlst()
    facts = dict(ftp.mlsd())
    assert facts[name]['type'] == 'file' and facts[name]['size'] == '123457', facts
    ftp.rename(name, name + '.x')
    ftp.delete(name + '.x')
ftp.mkd('pd')
ftp.cwd('pd')
assert ftp.pwd() == '/pd'
ftp.cwd('..')
ftp.rmd('pd')
assert ftp.sendcmd('MDTM f.bin').startswith('213 ')
assert ftp.sendcmd('SYST').startswith('215')
ftp.quit()
PY
	pass "ftplib: get, REST, put, size, nlst, mlsd, rename, delete, mkd, cwd, rmd over $host, both modes"
done

grep -q "RETR /f.bin 3000000 bytes .* MB/s .* ok" "$work/xftpd.log" ||
	fail "no transfer log line: $(tail -5 "$work/xftpd.log")"
pass "one log line per transfer, with bytes, seconds and MB/s"

log_clean
