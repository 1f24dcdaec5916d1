#!/usr/bin/env bash
# Installs what building, testing and running Plait need on Debian 12, and nothing when it
# is already there: make demo and make test call it every time.
set -euo pipefail

apt_pkgs=(
	clang llvm libbpf-dev bpftool linux-libc-dev   # eBPF programs (bpf2go, libbpf headers)
	iproute2 ethtool iputils-ping util-linux psmisc # namespaces, links, offloads
	iperf3                                          # traffic
	nftables                                        # tests: a firewall rule on the tunnel device
	mininet mptcpize                                # labs; mptcpize runs the MPTCP baseline
	python3 python3-venv python3-pip python3-pytest
	python3-matplotlib python3-yaml python3-scapy
	protobuf-compiler                               # regenerating api/ (make generate)
)

missing=()
for p in "${apt_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $EUID -ne 0 ]]; then
		echo "deps: need root to install ${missing[*]} (run make as root)" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# go.mod asks for Go 1.26. Debian 12's golang (1.19) cannot switch toolchains itself, so it
# downloads the pinned release once as the module golang.org/toolchain (what newer go
# commands fetch for themselves; the go command checks its checksum) into /usr/local/go.
go_release=1.26.8
go_new_enough() { command -v go >/dev/null && [[ $(go version) =~ go1\.(2[1-9]|[3-9][0-9]) ]]; }
if ! go_new_enough; then
	if [[ $EUID -ne 0 ]]; then
		echo "deps: Go 1.21 or newer is needed; run make as root to install Go $go_release" >&2
		exit 1
	fi
	command -v go >/dev/null || {
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go ca-certificates >/dev/null
	}
	echo "deps: installing Go $go_release into /usr/local/go"
	tmp=$(mktemp -d)
	dir=$(cd "$tmp" && GOMODCACHE="$tmp/cache" GOFLAGS= GO111MODULE=on \
		go mod download -json "golang.org/toolchain@v0.0.1-go$go_release.linux-$(dpkg --print-architecture)" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
	rm -rf /usr/local/go
	cp -r "$dir" /usr/local/go
	chmod -R u+w,a+rX /usr/local/go
	chmod a+x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/*
	chmod -R u+w "$tmp" && rm -rf "$tmp"
	ln -sf /usr/local/go/bin/go /usr/local/go/bin/gofmt /usr/local/bin/
	hash -r
	go_new_enough || { echo "deps: Go $go_release was installed in /usr/local/go but $(command -v go) comes first on PATH" >&2; exit 1; }
fi
go mod download

# p4runtime-shell, the third-party P4Runtime client the switch is tested with, lives in a
# venv so it cannot disturb the system Python that Mininet runs on.
venv=.venv
if [[ ! -x $venv/bin/python ]] || ! $venv/bin/python -c 'import p4runtime_sh' 2>/dev/null; then
	echo "deps: installing p4runtime-shell into $venv"
	/usr/bin/python3 -m venv "$venv"
	$venv/bin/pip install -q -r scripts/requirements.txt
fi

# /sys/fs/bpf exists but is not always mounted; BPF pins need it.
if ! mountpoint -q /sys/fs/bpf 2>/dev/null && [[ $EUID -eq 0 ]]; then
	mount -t bpf bpf /sys/fs/bpf
fi
