# blast and sink on every bad input: one line naming the problem, a non-zero exit, never a
# crash or a hang. (Faults in the middle of a run are tests/netns's.)
source "$(dirname "$0")/lib.sh"
blast=$DS_BIN/blast
sink=$DS_BIN/sink

expect_error "blast: unknown flag" "unknown option .-Z." "$blast" -Z 127.0.0.1
expect_error "blast: three workers" "unknown option .-3." "$blast" -3 127.0.0.1
expect_error "blast: a flag without its value" "-l needs a value" "$blast" 127.0.0.1 -l
expect_error "blast: a long option without its value" "--flow needs a value" "$blast" 127.0.0.1 --flow
expect_error "blast: no destination" "expected one DEST" "$blast" -x tcp
expect_error "blast: a length too small" "-l: '3' is out of range \(64 to 1G\)" "$blast" -l 3 127.0.0.1
expect_error "blast: a size with a bad suffix" "-l: '12Q' is not a size" "$blast" -l 12Q 127.0.0.1
expect_error "blast: a zero count" "-n: '0' is out of range" "$blast" -n 0 127.0.0.1
expect_error "blast: a bad duration" "-w: 'soon' is not a duration" "$blast" -w soon 127.0.0.1
expect_error "blast: count and duration" "-n and -w are exclusive" "$blast" -n 5 -w 1 127.0.0.1
expect_error "blast: fewer messages than streams" "-n 2 is fewer messages than -q 4 streams" "$blast" -n 2 -q 4 127.0.0.1
expect_error "blast: an unknown link" "-x: 'hippi' is not a link this build knows" "$blast" -x hippi 127.0.0.1
expect_error "blast: raw without an interface" "-x raw needs -d IFACE" "$blast" -x raw 02:00:00:00:00:01
expect_error "blast: --op off verbs" "--op is for -x verbs only" "$blast" --op read 127.0.0.1
expect_error "blast: a bad flow mode" "--flow: 'maybe' is not credit or none" "$blast" --flow maybe 127.0.0.1
expect_error "blast: a bad rate" "-R: 'fast' is not a rate" "$blast" -R fast 127.0.0.1
expect_error "blast: a port out of range" "-p: '70000' is not a port" "$blast" -p 70000 127.0.0.1
expect_error "blast: nobody listening" "^blast: nobody is receiving on 127\\.0\\.0\\.1 port 16601: Connection refused$" \
	"$blast" -p 16601 -n 10 127.0.0.1
expect_error "blast -x udp: nobody listening" "^blast: nobody is receiving on 127\\.0\\.0\\.1 port 16601: Connection refused$" \
	"$blast" -x udp -p 16601 -n 10 127.0.0.1
expect_error "blast: an unknown host" "no\\.such\\.host\\.invalid" "$blast" --timeout 3 -n 10 no.such.host.invalid

expect_error "sink: unknown flag" "unknown option .--frobnicate." "$sink" --frobnicate
expect_error "sink: a stray argument" "unexpected argument 'extra'" "$sink" extra
expect_error "sink: --pcap off raw" "--pcap is for -x raw only" "$sink" --pcap /dev/null
expect_error "sink: a bad rate unit" "-f: .x. is not a unit" "$sink" -f x
expect_error "sink: a bad idle time" "--idle: 'never' is not a duration" "$sink" --idle never
expect_error "sink: raw on an interface that is not there" "nosuchif0" "$sink" -x raw -d nosuchif0 --once

# The port is taken.
socat TCP-LISTEN:16602,reuseaddr - >/dev/null &
wait_listening 16602
expect_error "sink: port in use" "16602" "$sink" -p 16602 --once
echo "$checks passed, 0 failed"
