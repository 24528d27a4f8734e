# shellcheck shell=bash
# guest-lib.sh: helpers for scripts that boot.sh runs inside the test VM.
# Source it:  . "$DS_SRC/tests/vm/guest-lib.sh"   (or via the script's own dir)
#
#   ds_vm_rxe_up [NETDEV [ADDR]]   soft-RoCE device rxe0; exports DS_RXE_DEV,
#                                  DS_RXE_IP, DS_RXE_GID_INDEX, DS_RXE_NETDEV
#   ds_vm_gid_index DEV IP         index of the RoCE v2 GID ::ffff:IP on DEV port 1
#   ds_vm_wait_tcp PORT [SEC]      wait until something listens on TCP PORT
#   ds_vm_wait_rdma_cm PORT [SEC]  wait until an RDMA CM id listens on PORT
#   ds_vm_modprobe MODULE [ARGS]   modprobe from the guest kernel's module tree
#   ds_vm_bench_rxe USAGE          a bench's guest half on soft-RoCE: rxe0 up, jq there,
#                                  $logs and an empty $results under $DS_VM_WORK
#   ds_vm_store_roots DISK...      make DISK/s for xftpd's user nobody on each; print
#                                  their paths comma-separated (a striped --root)
#   ds_vm_die MESSAGE              print "FAIL: MESSAGE" and exit 1
#
# Functions print one line on stderr and return non-zero when they fail.

ds_vm_die() {
	echo "FAIL: $*" >&2
	exit 1
}

ds_vm_modprobe() {
	if [ -n "${DS_VM_KROOT:-}" ] && [ -d "$DS_VM_KROOT/lib/modules" ]; then
		modprobe -d "$DS_VM_KROOT" "$@"
	else
		modprobe "$@"
	fi
}

# ds_vm_gid_index DEV IP: print the index of the RoCE v2 GID that maps IPv4 IP.
ds_vm_gid_index() {
	local dev=$1 ip=$2 a b c d want gid f n type
	IFS=. read -r a b c d <<<"$ip"
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
	for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
		[ -r "$f" ] || continue
		gid=$(cat "$f" 2>/dev/null) || continue
		[ "$gid" = "$want" ] || continue
		n=${f##*/}
		type=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$n" 2>/dev/null || echo "RoCE v2")
		case $type in *v2*)
			echo "$n"
			return 0
			;;
		esac
	done
	return 1
}

# ds_vm_rxe_up [NETDEV [ADDR]]: with no arguments, a dummy netdev d0 with
# 198.18.0.1/24 (one node talking to itself); given an existing NETDEV such as
# eth0 (two VMs, see boot.sh --net-listen), ADDR (with /prefix) goes on it.
ds_vm_rxe_up() {
	local netdev=${1:-d0} addr=${2:-198.18.0.1/24} ip i state gid_index
	ip=${addr%/*}
	[ "$addr" != "$ip" ] || addr=$addr/24
	if ! ip link show "$netdev" >/dev/null 2>&1; then
		ip link add "$netdev" type dummy || {
			echo "ds_vm_rxe_up: cannot create dummy netdev $netdev" >&2
			return 1
		}
	fi
	ip link set "$netdev" up
	ip addr replace "$addr" dev "$netdev"
	if [ ! -e /sys/class/infiniband/rxe0 ]; then
		rdma link add rxe0 type rxe netdev "$netdev" || {
			echo "ds_vm_rxe_up: rdma link add rxe0 type rxe netdev $netdev failed" >&2
			return 1
		}
	fi
	# The port goes ACTIVE and the GID table fills shortly after the link is added.
	state="" gid_index=""
	for ((i = 0; i < 100; i++)); do
		state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null || true)
		case $state in *ACTIVE*)
			gid_index=$(ds_vm_gid_index rxe0 "$ip") && break ;;
		esac
		sleep 0.1
	done
	case $state in *ACTIVE*) ;; *)
		echo "ds_vm_rxe_up: rxe0 port state is '$state', not ACTIVE" >&2
		return 1
		;;
	esac
	[ -n "$gid_index" ] || {
		echo "ds_vm_rxe_up: rxe0 has no RoCE v2 GID for $ip" >&2
		return 1
	}
	export DS_RXE_DEV=rxe0 DS_RXE_IP=$ip DS_RXE_GID_INDEX=$gid_index DS_RXE_NETDEV=$netdev
}

# ds_vm_wait_tcp PORT [SEC]: poll until a TCP socket listens on PORT.
ds_vm_wait_tcp() {
	local port=$1 limit=${2:-30} end
	end=$((SECONDS + limit))
	while [ -z "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; do
		if [ "$SECONDS" -ge "$end" ]; then
			echo "ds_vm_wait_tcp: nothing listens on TCP port $port after ${limit}s" >&2
			return 1
		fi
		sleep 0.1
	done
}

# ds_vm_wait_rdma_cm PORT [SEC]: poll until an RDMA CM id listens on PORT.
ds_vm_wait_rdma_cm() {
	local port=$1 limit=${2:-30} end
	end=$((SECONDS + limit))
	until rdma resource show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:$port( |\$)"; do
		if [ "$SECONDS" -ge "$end" ]; then
			echo "ds_vm_wait_rdma_cm: no RDMA CM id listens on port $port after ${limit}s" >&2
			return 1
		fi
		sleep 0.1
	done
}

ds_vm_store_roots() {
	local d roots=""
	for d in "$@"; do
		mkdir -p "$d/s" && chown nobody "$d/s" || return 1
		roots=${roots:+$roots,}$d/s
	done
	echo "$roots"
}

# ds_vm_bench_rxe USAGE: what the guest half of a bench on soft-RoCE starts with: run
# inside the VM (else USAGE is said), jq at hand, rxe0 up on d0 with 198.18.0.1 (DS_RXE_*
# exported) and d0's MTU DS_RXE_MTU (default 1500), said on a line "link: ...", and $logs
# (a folder) and $results (an empty TSV) under $DS_VM_WORK.
ds_vm_bench_rxe() {
	[ -n "${DS_VM_WORK:-}" ] || ds_vm_die "run me inside the VM: tests/vm/boot.sh $1"
	command -v jq >/dev/null || ds_vm_die "jq is not installed"
	ds_vm_rxe_up d0 198.18.0.1/24 || ds_vm_die "soft-RoCE set-up"
	# rxe takes its RoCE MTU (1024 to 4096) from the netdev's: 4096 needs 9000.
	ip link set d0 mtu "${DS_RXE_MTU:-1500}" || ds_vm_die "d0: MTU '${DS_RXE_MTU:-}'"
	local roce
	roce=$(ibv_devinfo -d rxe0 | awk '$1 == "active_mtu:" { print $2; exit }')
	echo "link: rxe0 on d0, MTU ${DS_RXE_MTU:-1500}, RoCE MTU ${roce:-unknown}"
	# shellcheck disable=SC2034 # the bench's own variables
	logs=$DS_VM_WORK/logs results=$DS_VM_WORK/results.tsv
	mkdir -p "$logs"
	: >"$results"
}
