# Every bad input: one line naming the problem, a non-zero exit, never a crash or a hang.
source "$(dirname "$0")/lib.sh"
ttcp=$DS_BIN/ttcp

expect_error "unknown flag" "unknown option .-Z." "$ttcp" -t -Z 127.0.0.1
expect_error "an unknown long option" "unknown option '--frobnicate'" "$ttcp" -r --frobnicate
expect_error "a flag without its value" "-l needs a value" "$ttcp" -t -s 127.0.0.1 -l
expect_error "neither -t nor -r" "say -t host to transmit or -r" "$ttcp" -s
expect_error "-t without a host" "-t needs exactly one host" "$ttcp" -t -s
expect_error "a size with a bad suffix" "-l: '12Q' is not a size" "$ttcp" -t -s -l 12Q 127.0.0.1
expect_error "a negative size" "-l: '-5' is not a size" "$ttcp" -t -s -l -5 127.0.0.1
expect_error "a zero length" "-l: '0' is out of range" "$ttcp" -t -s -l 0 127.0.0.1
expect_error "an overflowing size" "-n: '99999999999999999999' is (out of range|not a size)" \
	"$ttcp" -t -s -n 99999999999999999999 127.0.0.1
expect_error "a port out of range" "-p: '70000' is not a port" "$ttcp" -r -s -p 70000
expect_error "a bad rate unit" "-f: 'x' is not a unit" "$ttcp" -r -s -f x
expect_error "a bad duration" "-w: 'soon' is not a duration" "$ttcp" -t -s -w soon 127.0.0.1
expect_error "UDP datagram too long" "-l: a UDP datagram holds at most" "$ttcp" -t -u -s -l 70000 127.0.0.1
expect_error "a stream count with a size suffix" "-P: '1K' is not a count from 1 to 128" \
	"$ttcp" -t -s -P 1K 127.0.0.1
expect_error "no streams" "-P: '0' is not a count from 1 to 128" "$ttcp" -t -s -P 0 127.0.0.1
expect_error "parallel UDP" "-P: parallel streams are TCP only" "$ttcp" -t -u -s -P 2 127.0.0.1
expect_error "a negative timeout" "--timeout: '-1' is not a duration" "$ttcp" -r -s --timeout -1
expect_error "splice on a transmitter" "--splice is for a TCP receiver" "$ttcp" -t -s --splice 127.0.0.1

# Nobody listening, a name that does not resolve.
expect_error "connection refused" "Connection refused" "$ttcp" -t -s -p 16501 127.0.0.1
# --timeout takes 0 and inf for "wait forever": these get as far as connecting.
expect_error "--timeout 0 is accepted" "Connection refused" "$ttcp" -t -s --timeout 0 -p 16501 127.0.0.1
expect_error "--timeout inf is accepted" "Connection refused" "$ttcp" -t -s --timeout inf -p 16501 127.0.0.1
expect_error "an unknown host" "no\\.such\\.host\\.invalid" "$ttcp" -t -s --timeout 3 no.such.host.invalid

# The port is taken.
socat TCP-LISTEN:16502,reuseaddr - >/dev/null &
wait_listening 16502
expect_error "port in use" "port 16502 is in use" "$ttcp" -r -s -p 16502
kill %1 2>/dev/null || true

# The receiver closes early: the transmitter says so.
socat -u TCP-LISTEN:16503,reuseaddr SYSTEM:'head -c 100000 >/dev/null' &
wait_listening 16503
expect_error "peer closing early" "closed the connection|Connection reset" \
	"$ttcp" -t -s -l 64K -n 100000 -p 16503 127.0.0.1

# A receiver that stops reading: the transmitter gives up after --timeout.
socat -u TCP-LISTEN:16504,reuseaddr SYSTEM:'sleep 10' &
wait_listening 16504
expect_error "peer that stops reading" "stopped reading for 1 s" \
	"$ttcp" -t -s -l 64K -n 100000 --timeout 1 -p 16504 127.0.0.1

# A transmitter that connects and never sends: the receiver gives up after --timeout.
( sleep 0.5; exec socat -u SYSTEM:'sleep 10' TCP:127.0.0.1:16505 ) &
expect_error "peer that never sends" "no data from 127\\.0\\.0\\.1:[0-9]+ for 1 s" \
	"$ttcp" -r -s --timeout 1 -p 16505
echo "$checks passed, 0 failed"
