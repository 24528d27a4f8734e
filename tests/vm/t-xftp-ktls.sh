#!/bin/bash
# Guest script: FTPS with kernel TLS. The host kernel has no tls module; Debian's has.
# xftp --tls get and put through xftpd --tls-required over loopback, one stream (a file
# send goes by SSL_sendfile) and four; each must raise TlsTxSw in /proc/net/tls_stat (the
# kernel made the records), xftp --json must say "ktls":true for the get, and the bytes
# must come back whole; gets with TLS 1.3's AES-128-GCM and ChaCha20-Poly1305 must be
# the kernel's too. A TLS 1.2 put from curl raises TlsRxSw (kernel receive).
#   boot.sh t-xftp-ktls.sh [MIB]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$here/guest-lib.sh"
mib=${1:-24}
bin=${DS_BIN:?DS_BIN must name the folder of the built tools}
for m in tls gcm ghash_generic ctr; do
	ds_vm_modprobe "$m" 2>/dev/null || true
done
[ -r /proc/net/tls_stat ] || ds_vm_die "no kernel TLS in the guest (modprobe tls failed)"
tx_sw() { awk '$1 == "TlsTxSw" { print $2 }' /proc/net/tls_stat; }

cd "$TMPDIR"
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 2 \
	-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null
mkdir -p root
chown nobody root
printf 'pw\n' | "$bin/xftpd" --add-user users t >/dev/null
timeout 200 "$bin/xftpd" -p 2121 --listen 127.0.0.1 --root root --users users --run-as nobody \
	--tls-cert cert.pem --tls-key key.pem --tls-required 2>xftpd.log &
trap 'kill $! 2>/dev/null || true' EXIT
ds_vm_wait_tcp 2121 || ds_vm_die "xftpd did not listen"
url=ftp://t:pw@127.0.0.1:2121
head -c $((mib * 1048576 + 12345)) /dev/urandom >src

for streams in 1 4; do
	before=$(tx_sw)
	timeout 60 "$bin/xftp" --tls --cacert cert.pem -q -P "$streams" put src "$url/f$streams" ||
		ds_vm_die "put over $streams stream(s): $(tail -3 xftpd.log)"
	after_put=$(tx_sw)
	[ "$after_put" -gt "$before" ] || ds_vm_die "put: TlsTxSw stayed at $before"
	cmp src "root/f$streams" || ds_vm_die "put over $streams stream(s): the bytes differ"
	timeout 60 "$bin/xftp" --tls --cacert cert.pem --json -P "$streams" get "$url/f$streams" \
		back >get.json || ds_vm_die "get over $streams stream(s): $(tail -3 xftpd.log)"
	after_get=$(tx_sw)
	[ "$after_get" -gt "$after_put" ] || ds_vm_die "get: TlsTxSw stayed at $after_put"
	cmp src back || ds_vm_die "get over $streams stream(s): the bytes differ"
	# TLS 1.3: the kernel seals, xftp opens (OpenSSL 3.0 gives the kernel no receiving keys)
	grep -q '"ktls":true' get.json && grep -q '"tls_sealed_by":"kernel"' get.json &&
		grep -q '"tls_opened_by":"xftp"' get.json || ds_vm_die "get: --json says $(cat get.json)"
	rm -f back
	echo "ok: put and get over $streams stream(s) through kernel TLS (TlsTxSw $before -> $after_get), $(grep -o '"tls_version":"[^"]*","tls_cipher":"[^"]*"' get.json)"
done
# Each suite the kernel takes is seen as the kernel's: TLS 1.3's AES-128-GCM and
# ChaCha20-Poly1305 too (their key structures are smaller than AES-256-GCM's, or as large).
for suite in TLS_AES_128_GCM_SHA256 TLS_CHACHA20_POLY1305_SHA256; do
	printf 'openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\nsystem_default = suites\n[suites]\nCiphersuites = %s\n' \
		"$suite" >"$suite.cnf"
	OPENSSL_CONF=$PWD/$suite.cnf timeout 60 "$bin/xftp" --tls --cacert cert.pem --json get \
		"$url/f1" back >get.json || ds_vm_die "get with $suite: $(tail -3 xftpd.log)"
	cmp src back || ds_vm_die "get with $suite: the bytes differ"
	if ! grep -q "\"tls_cipher\":\"$suite\"" get.json ||
		! grep -q '"tls_sealed_by":"kernel"' get.json; then
		ds_vm_die "get with $suite: --json says $(cat get.json)"
	fi
	rm -f back
	echo "ok: a get with $suite through kernel TLS"
done
# TLS 1.2 (curl --tls-max 1.2): the kernel takes xftpd's receiving side too.
rx_sw() { awk '$1 == "TlsRxSw" { print $2 }' /proc/net/tls_stat; }
before=$(rx_sw)
timeout 60 curl -sS --ssl-reqd --tls-max 1.2 --cacert cert.pem -T src "$url/c12" ||
	ds_vm_die "curl put with TLS 1.2: $(tail -3 xftpd.log) $(cat /proc/net/tls_stat)"
[ "$(rx_sw)" -gt "$before" ] || ds_vm_die "TLS 1.2 put: TlsRxSw stayed at $before"
cmp src root/c12 || ds_vm_die "TLS 1.2 put: the bytes differ"
echo "ok: a TLS 1.2 put (curl) went through xftpd's kernel TLS receive (TlsRxSw $before -> $(rx_sw))"
cat /proc/net/tls_stat
echo "PASS: FTPS through kernel TLS"
