#!/usr/bin/env bash
# Stripes one iperf3 TCP flow over three plain veth paths between two namespaces with
# weights 1:2:3, then prints what each path carried and what the receivers measured.
# Everything it creates is removed on exit, error or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
PLAIT=${PLAIT:-bin/plait}
DURATION=${DURATION:-10}
run=/run/plait-demo-$$
h1=plait-demo-$$-h1
h2=plait-demo-$$-h2

inns() { local ns=$1; shift; nsenter --net=/run/netns/$ns -- "$@"; }

cleanup() {
	set +e
	for ns in $h1 $h2; do
		[[ -e /run/netns/$ns ]] || continue
		ino=$(stat -L -c %i /run/netns/$ns)
		ip netns pids $ns | xargs -r kill 2>/dev/null
		sleep 0.2
		ip netns delete $ns
		rm -rf /sys/fs/bpf/plait/netns-$ino /run/plait/netns-$ino
	done
	rm -rf $run
}
trap cleanup EXIT INT TERM

[[ $EUID -eq 0 ]] || { echo "demo: needs root to create namespaces and load eBPF" >&2; exit 1; }
mkdir -p $run
ip netns add $h1
ip netns add $h2
for i in 1 2 3; do
	ip link add eth$i netns $h1 type veth peer name eth$i netns $h2
	for ns in $h1 $h2; do
		inns $ns ethtool -K eth$i tx off rx off tso off gso off gro off >/dev/null
		inns $ns ip link set eth$i up
	done
	inns $h1 ip addr add 10.0.$i.1/24 dev eth$i
	inns $h2 ip addr add 10.0.$i.2/24 dev eth$i
done
for ns in $h1 $h2; do inns $ns ip link set lo up; done

echo "== starting an agent in each host"
inns $h1 $PLAIT agent --socket $run/h1.sock 2>$run/h1.log &
inns $h2 $PLAIT agent --socket $run/h2.sock 2>$run/h2.log &
for s in h1 h2; do
	for _ in $(seq 50); do [[ -S $run/$s.sock ]] && break; sleep 0.1; done
done

paths() {
	local peer=$1
	for i in 1 2 3; do printf -- '--path name=path%d,dev=eth%d,remote=10.0.%d.%d ' $i $i $i $peer; done
}
echo "== tunnel 1: h1 10.99.0.1 <-> h2 10.99.0.2, three paths, weights 1:2:3 from h1"
inns $h1 $PLAIT --agent $run/h1.sock tunnel add --id 1 --device plait0 --address 10.99.0.1/24 $(paths 2) --mode wrr --weights 1,2,3
inns $h2 $PLAIT --agent $run/h2.sock tunnel add --id 1 --device plait0 --address 10.99.0.2/24 $(paths 1) >/dev/null

echo "== iperf3, one TCP flow for ${DURATION}s through the tunnel"
inns $h2 iperf3 -s -1 >/dev/null &
sleep 0.3
inns $h1 iperf3 -c 10.99.0.2 -t "$DURATION" -C cubic | tail -4

echo
echo "== h1: what each path carried (TX SHARE follows the weights 1:2:3)"
inns $h1 $PLAIT --agent $run/h1.sock stats --interval 10s
echo
echo "== h2: what the receiver measured on the data it received"
inns $h2 $PLAIT --agent $run/h2.sock stats --interval 10s
