#!/usr/bin/env bash
# Installs what building, testing and running Plait need on Debian 12, and nothing when it
# is already there: make demo and make test call it every time.
set -euo pipefail

apt_pkgs=(
	clang llvm libbpf-dev bpftool linux-libc-dev   # eBPF programs (bpf2go, libbpf headers)
	iproute2 ethtool iputils-ping util-linux psmisc # namespaces, links, offloads
	iperf3                                          # traffic
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

if ! command -v go >/dev/null; then
	echo "deps: Go is not installed; install Go >= 1.21 (it fetches the pinned toolchain itself)" >&2
	exit 1
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
