package datapath

// The objects are embedded in the binary; regenerate with `make generate`.
//go:generate go tool bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I../include $BPF_CFLAGS" -type tx_cfg -type tx_path -type tx_state -type tx_path_stats -type plait_mode -type tx_flag -type sender_stat sender ../sender.bpf.c
//go:generate go tool bpf2go -cc clang -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I../include $BPF_CFLAGS" -type rx_tunnel -type rx_shared -type rx_stats -type rx_ports -type rx_flag -type rx_reseq -type rx_gap -type receiver_stat receiver ../receiver.bpf.c
