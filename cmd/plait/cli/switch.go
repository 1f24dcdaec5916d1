package cli

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/p4/p4switch"
	"github.com/spf13/cobra"
)

func newSwitchCmd() *cobra.Command {
	var (
		name, addr, p4infoPath string
		ports, links, pairs    []string
		deviceID               uint64
		cpuPort                uint16
		noPipeline             bool
		tick                   time.Duration
		ssl, clientAuth        bool
		caCert, cert, key      string
	)
	cmd := &cobra.Command{
		Use:   "switch",
		Short: "Run the embedded P4 switch (plait.p4 in Go, P4Runtime, link emulation)",
		Long: `Run one switch: plait.p4's pipeline on Linux interfaces, served over P4Runtime and
LinkEmulation on one gRPC address. Every egress port emulates a link (rate, delay, jitter,
loss, queue, down), set with --link and changed at run time with 'plait link set'.

The switch starts with plait.p4's P4Info committed (device config empty), so a controller
can write entries at once; SetForwardingPipelineConfig accepts plait.p4's P4Info (any IDs)
with an empty or BMv2 JSON device config.

With --passthrough the switch is a link element instead: no pipeline and no P4Runtime,
frames received on one port of a pair leave through the other port's link. Put in series
with another switch's ports (BMv2, which has no link emulation), it shapes that switch's
links with the same code as the embedded switch's egress ports.`,
		Example: `  plait switch --name s1 --grpc 127.0.0.1:9559 --port 1=veth1 --port 2=veth2 \
    --link 2:rate=5mbit,delay=100ms,jitter=1ms,loss=0.5,queue=50
  plait switch --name e1 --grpc 127.0.0.1:9560 --port 1=to-host --port 2=to-bmv2 \
    --passthrough 1:2 --link 1:rate=5mbit,delay=100ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("switch", name)
			opts := []p4switch.Option{p4switch.WithDeviceID(deviceID), p4switch.WithCPUPort(cpuPort), p4switch.WithLogger(log), p4switch.WithTick(tick)}
			for _, pr := range pairs {
				a, b, ok := strings.Cut(pr, ":")
				na, erra := strconv.ParseUint(a, 10, 16)
				nb, errb := strconv.ParseUint(b, 10, 16)
				if !ok || erra != nil || errb != nil {
					return usagef(cmd, "--passthrough %q: want PORT:PORT, e.g. 1:2", pr)
				}
				opts = append(opts, p4switch.WithPassthrough(uint16(na), uint16(nb)))
			}
			if len(pairs) > 0 && (noPipeline || p4infoPath != "") {
				return usagef(cmd, "--passthrough runs no pipeline: drop --no-pipeline and --p4info")
			}
			if noPipeline {
				opts = append(opts, p4switch.WithoutPipeline())
			} else if p4infoPath != "" {
				b, err := os.ReadFile(p4infoPath)
				if err != nil {
					return fmt.Errorf("read p4info: %w", err)
				}
				info, err := p4info.Parse(b)
				if err != nil {
					return err
				}
				opts = append(opts, p4switch.WithP4Info(info))
			}
			params := map[uint16]p4switch.LinkParams{}
			for _, l := range links {
				num, spec, ok := strings.Cut(l, ":")
				n, err := strconv.ParseUint(num, 10, 16)
				if !ok || err != nil {
					return usagef(cmd, "--link %q: want PORT:key=value,..., e.g. 2:rate=5mbit,delay=100ms", l)
				}
				m, err := parseLinkSpec(spec)
				if err != nil {
					return usagef(cmd, "--link %q: %v", l, err)
				}
				params[uint16(n)] = p4switch.MergeLinkParams(params[uint16(n)], m)
			}
			if len(ports) == 0 {
				return usagef(cmd, "no ports: give at least one --port NUM=INTERFACE")
			}
			seen := map[uint16]bool{}
			for _, p := range ports {
				num, ifname, ok := strings.Cut(p, "=")
				n, err := strconv.ParseUint(num, 10, 16)
				if !ok || err != nil || ifname == "" {
					return usagef(cmd, "--port %q: want NUM=INTERFACE, e.g. 1=veth1", p)
				}
				port, err := p4switch.OpenInterface(ifname)
				if err != nil {
					return err
				}
				opts = append(opts, p4switch.WithPort(uint16(n), port, params[uint16(n)]))
				seen[uint16(n)] = true
			}
			for n := range params {
				if !seen[n] {
					return usagef(cmd, "--link for port %d, which no --port names", n)
				}
			}
			sw, err := p4switch.New(opts...)
			if err != nil {
				return err
			}
			defer sw.Close()
			l := sockrpc.Listener{Endpoint: sockrpc.Endpoint{Address: addr}}
			if ssl {
				l.TLS = sockrpc.TLS{Cert: cert, Key: key}
				if clientAuth {
					l.TLS.CA = caCert
				}
			}
			if clientAuth && (!ssl || caCert == "") {
				return usagef(cmd, "--grpc-server-with-client-auth needs --grpc-server-ssl and --grpc-server-cacert")
			}
			g, lis, err := sockrpc.Listen(l)
			if err != nil {
				return err
			}
			sw.Register(g)
			if err := sw.Start(); err != nil {
				return err
			}
			errc := make(chan error, 1)
			go func() { errc <- g.Serve(lis) }()
			log.Info("switch running", "grpc", l.Describe(), "ports", len(ports), "device_id", deviceID, "passthrough", pairs, "gomaxprocs", runtime.GOMAXPROCS(0))
			defer func() {
				log.Info("switch stopped", "stats", fmt.Sprintf("%+v", sw.Stats()))
				for _, p := range sw.Ports() {
					if st := p.Stats; st.Late1ms > 0 {
						log.Warn("packets sent late: the machine descheduled the port's link emulation (they are reordered against other links by as much)",
							"port", p.Port, "sent", st.TxPackets, "late_1ms", st.Late1ms, "late_5ms", st.Late5ms, "max", st.LateMax)
					}
				}
			}()
			select {
			case <-cmd.Context().Done():
				g.Stop()
				return nil
			case err := <-errc:
				return fmt.Errorf("grpc server: %w", err)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "switch", "name used in logs")
	f.StringVar(&addr, "grpc", "127.0.0.1:9559", "address to serve P4Runtime and LinkEmulation on (mutual TLS required unless loopback)")
	// BMv2 simple_switch_grpc's names, so that a lab can start either switch alike.
	f.BoolVar(&ssl, "grpc-server-ssl", false, "serve over TLS")
	f.StringVar(&caCert, "grpc-server-cacert", "", "CA certificate (PEM) client certificates must be signed by")
	f.StringVar(&cert, "grpc-server-cert", "", "the switch's certificate (PEM)")
	f.StringVar(&key, "grpc-server-key", "", "the switch's private key (PEM)")
	f.BoolVar(&clientAuth, "grpc-server-with-client-auth", false, "require a client certificate signed by --grpc-server-cacert (mutual TLS)")
	f.StringArrayVar(&ports, "port", nil, "NUM=INTERFACE: a switch port on a Linux interface (repeatable)")
	f.StringArrayVar(&links, "link", nil, "PORT:rate=5mbit,delay=100ms,jitter=1ms,loss=0.5,queue=50[,reorder][,down][,ge=p/r/lg/lb]: link emulated on the port's egress (repeatable)")
	f.Uint64Var(&deviceID, "device-id", 1, "P4Runtime device id")
	f.Uint16Var(&cpuPort, "cpu-port", p4switch.DefaultCPUPort, "CPU port (must equal plait.p4's CPU_PORT)")
	f.StringVar(&p4infoPath, "p4info", "", "P4Info to start with instead of the built-in one (text or binary)")
	f.DurationVar(&tick, "tick", 0, "wake each link at most once per tick (0: per packet; 1ms keeps a machine with few CPUs from reordering links, see WithTick)")
	f.BoolVar(&noPipeline, "no-pipeline", false, "start without a pipeline config, as BMv2 does")
	f.StringArrayVar(&pairs, "passthrough", nil, "A:B: forward between ports A and B through their links, no pipeline (a link element; repeatable, every port in one pair)")
	return cmd
}
