#!/bin/bash
# xftp --tls against vsftpd with TLS forced (force_anon_logins_ssl, force_anon_data_ssl,
# require_ssl_reuse): get, put and ls with --cacert; a certificate from an unknown CA
# refused; -P 4 falls back to one stream, still TLS.
. "$(dirname "$0")/xftp_lib.sh"
command -v vsftpd >/dev/null || fail "vsftpd is not installed (packages.txt)"
getent passwd ftp >/dev/null || fail "no ftp user (the vsftpd package makes it)"
cd "$work"
make_ca_and_server

port=2151
vs_root=$work/vs/root
mkdir -p "$vs_root/pub" "$work/vs/empty"
chmod 755 "$work/vs" "$vs_root"
chown ftp "$vs_root/pub"
{
	bench_vsftpd_conf "$vs_root" "$port" 0
	cat <<CONF
ssl_enable=YES
allow_anon_ssl=YES
force_anon_logins_ssl=YES
force_anon_data_ssl=YES
require_ssl_reuse=YES
ssl_ciphers=HIGH
rsa_cert_file=$work/srv.pem
rsa_private_key_file=$work/srv.key
CONF
} >"$work/vs/vsftpd.conf"
vsftpd "$work/vs/vsftpd.conf" &
wait_listening "$port"
url=ftp://127.0.0.1:$port

make_file "$vs_root/pub/a.bin" $((20 * 1048576 + 4097))
"$xftp" --tls --json --cacert ca.pem get -P 4 $url/pub/a.bin a.bin >get.json || fail "get"
same "$vs_root/pub/a.bin" a.bin "--tls --cacert get from vsftpd"
jq -e '.ok and .tls and .streams == 1 and (.tls_version | test("^TLSv1\\.[23]$"))' get.json \
	>/dev/null || fail "--json: $(cat get.json)"
pass "-P 4 falls back to one stream, TLS: $(jq -c '{tls_version, tls_cipher, ktls}' get.json)"
make_file up.bin $((7 * 1048576 + 1))
"$xftp" --tls -q --cacert ca.pem put up.bin $url/pub/up.bin >/dev/null || fail "put"
same up.bin "$vs_root/pub/up.bin" "--tls --cacert put to vsftpd"
"$xftp" --tls --cacert ca.pem ls $url/pub/ >ls.out || fail "ls"
grep -q 'up.bin$' ls.out && grep -q 'a.bin$' ls.out || fail "ls: $(cat ls.out)"
pass "--tls --cacert ls on vsftpd"
"$xftp" -q --cacert ca.pem get $url/pub/a.bin auto.bin >/dev/null || fail "TLS when offered"
same "$vs_root/pub/a.bin" auto.bin "without --tls, TLS is used where offered (vsftpd forces it)"
expect_error "vsftpd's certificate from an unknown CA is refused" "certificate" \
	"$xftp" --tls get $url/pub/a.bin nope.bin
[ ! -e nope.bin ] || fail "a refused server left a file"
