package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

// modelPredictRow is one model's answer for one split.
type modelPredictRow struct {
	Model      string            `json:"model"` // plait or best
	Mode       model.Mode        `json:"mode"`
	Paths      []string          `json:"paths"`
	Weights    []float64         `json:"weights,omitempty"`
	Prediction *model.Prediction `json:"prediction"`
}

type modelPredictOutput struct {
	Paths    []scenario.Path   `json:"paths"`
	Capacity float64           `json:"capacity_bps"`
	ADA      float64           `json:"ada_s"`
	ABA      float64           `json:"aba_bps"`
	TCP      model.TCP         `json:"tcp"`
	Paper    model.PaperResult `json:"paper"`
	Plait    []modelPredictRow `json:"plait"`
	Best     []modelPredictRow `json:"best"`
	// Assumptions say what the model takes for traces, bursty loss and events.
	Assumptions []string `json:"assumptions,omitempty"`
}

func newModelPredictCmd() *cobra.Command {
	var (
		pathSpecs []string
		file      string
		modes     []string
		weights   []float64
		asJSON    bool
		tf        modelTCPFlags
		pf        modelPaperFlags
	)
	cmd := &cobra.Command{
		Use:   "predict (--path RATE,DELAY[,key=value…]… | --scenario FILE)",
		Short: "Predict one flow's goodput over the given paths with both models",
		Long: `Predict prints, for the given paths, seed 002's model (round robin) and Plait's
predictor for each split mode over all paths, and the path set BestSubset picks per mode.

A path is RATE,DELAY (one-way) with optional key=value parts: loss (percent), queue
(packets), jitter and name, e.g. --path 5mbit,100ms,loss=0.5,queue=50,name=lte1.`,
		Example: `  plait model predict --path 5mbit,100ms --path 2mbit,10ms --path 7mbit,50ms
  plait model predict --scenario topo/scenarios/a2.yaml --cc bbr --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sc *scenario.Scenario
			var paths []scenario.Path
			switch {
			case file != "" && len(pathSpecs) > 0:
				return usagef(cmd, "give either --scenario or --path, not both")
			case file != "":
				s, err := scenario.Load(file)
				if err != nil {
					return err
				}
				sc, paths = s, s.Paths
			case len(pathSpecs) > 0:
				for i, spec := range pathSpecs {
					p, err := parseModelPath(spec, i)
					if err != nil {
						return usagef(cmd, "--path %q: %v", spec, err)
					}
					paths = append(paths, p)
				}
			default:
				return usagef(cmd, "no paths: give --path RATE,DELAY (repeat it per path) or --scenario FILE")
			}
			if len(paths) > model.MaxSubsetPaths {
				return usagef(cmd, "%d paths: at most %d", len(paths), model.MaxSubsetPaths)
			}
			var ms []model.Mode
			for _, m := range modes {
				mode, err := model.ParseMode(m)
				if err != nil {
					return usagef(cmd, "--mode: %v", err)
				}
				ms = append(ms, mode)
			}
			if weights != nil && len(weights) != len(paths) {
				return usagef(cmd, "--weights: %d weights for %d paths; give one per path", len(weights), len(paths))
			}
			tcp, err := tf.tcp(cmd, sc)
			if err != nil {
				return err
			}
			po, err := pf.options(cmd)
			if err != nil {
				return err
			}
			out, err := modelPredictAll(paths, ms, weights, tcp, po)
			if err != nil {
				return err
			}
			if sc != nil {
				out.Assumptions = model.Assumptions(sc)
			}
			if asJSON {
				return writeModelJSON(cmd.OutOrStdout(), out)
			}
			return printModelPredict(cmd.OutOrStdout(), out)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&pathSpecs, "path", nil, "a path: RATE,DELAY[,loss=PCT][,queue=PKTS][,jitter=DUR][,name=NAME] (repeat per path)")
	f.StringVar(&file, "scenario", "", "take the paths (and cc, duration) from a scenario file")
	f.StringSliceVar(&modes, "mode", []string{"rr", "wrr", "edpf"}, "split modes to predict")
	f.Float64SliceVar(&weights, "weights", nil, "wrr weights, one per path (default: the paths' rates)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	tf.register(f)
	pf.register(f)
	return cmd
}

// parseModelPath reads RATE,DELAY[,key=value…]; rate and delay may also be keyed.
func parseModelPath(spec string, i int) (scenario.Path, error) {
	p := scenario.Path{Name: string(rune('a' + i)), Queue: scenario.DefaultQueue}
	var positional int
	var haveRate, haveDelay bool
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		key, val, keyed := strings.Cut(part, "=")
		if !keyed {
			val = part
			switch positional {
			case 0:
				key = "rate"
			case 1:
				key = "delay"
			default:
				return p, fmt.Errorf("%q: only rate and delay go without a key; write e.g. loss=1", part)
			}
			positional++
		}
		var err error
		switch strings.ToLower(key) {
		case "rate":
			p.Rate, err = scenario.ParseRate(val)
			haveRate = true
		case "delay":
			p.Delay, err = scenario.ParseDuration(val)
			haveDelay = true
		case "jitter":
			p.Jitter, err = scenario.ParseDuration(val)
		case "loss":
			p.Loss, err = scenario.ParsePercent(val)
		case "queue":
			p.Queue, err = strconv.Atoi(val)
			if err == nil && p.Queue < 1 {
				err = fmt.Errorf("queue %d: a drop-tail queue holds at least 1 packet", p.Queue)
			} else if err != nil {
				err = fmt.Errorf("queue %q: give a number of packets", val)
			}
		case "name":
			p.Name = val
		default:
			return p, fmt.Errorf("unknown key %q: use rate, delay, loss, queue, jitter or name", key)
		}
		if err != nil {
			return p, err
		}
	}
	if !haveRate || !haveDelay {
		return p, fmt.Errorf("needs a rate and a one-way delay, e.g. 5mbit,45ms")
	}
	return p, nil
}

func modelPredictAll(sp []scenario.Path, modes []model.Mode, weights []float64, tcp model.TCP, po model.PaperOptions) (*modelPredictOutput, error) {
	paths := model.PathsFromScenario(sp)
	out := &modelPredictOutput{Paths: sp, ADA: model.ADA(paths), ABA: model.ABA(paths), TCP: tcp.WithDefaults()}
	for _, p := range paths {
		out.Capacity += p.Rate
	}
	var err error
	if out.Paper, err = model.Paper(paths, po); err != nil {
		return nil, err
	}
	names := func(idx []int) []string {
		var ns []string
		for _, i := range idx {
			ns = append(ns, sp[i].Name)
		}
		return ns
	}
	for _, m := range modes {
		split := model.Split{Mode: m}
		if m == model.WRR {
			split.Weights = weights
		}
		p, err := model.Predict(paths, split, tcp)
		if err != nil {
			return nil, err
		}
		out.Plait = append(out.Plait, modelPredictRow{Model: "plait", Mode: m, Paths: names(p.Used), Weights: split.Weights, Prediction: &p})
		c, err := model.BestSubset(paths, m, tcp)
		if err != nil {
			return nil, err
		}
		row := modelPredictRow{Model: "best", Mode: m, Paths: names(c.Paths), Prediction: &c.Prediction}
		if m == model.WRR {
			row.Weights = c.Split.Weights
		}
		out.Best = append(out.Best, row)
	}
	return out, nil
}

func printModelPredict(w io.Writer, out *modelPredictOutput) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tRATE\tDELAY\tJITTER\tLOSS\tQUEUE")
	for _, p := range out.Paths {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%.3g%%\t%d\n", p.Name, modelRate(p.Rate), p.Delay, p.Jitter, 100*p.Loss, p.Queue)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "capacity %s, ADA %s, ABA %s; %s, window %d B, MSS %d B\n\n",
		modelRate(out.Capacity), modelSeconds(out.ADA), modelRate(out.ABA), out.TCP.CC, out.TCP.Window, out.TCP.MSS)
	fmt.Fprintln(tw, "MODEL\tSPLIT\tPATHS\tGOODPUT\tOF CAPACITY\tLIMIT\tRTT\tSKEW\tREORDERED\tSPURIOUS")
	fmt.Fprintf(tw, "paper\trr\tall\t%s\t%.1f%%\t-\t-\t-\t-\t-\n", modelRate(out.Paper.Throughput), 100*out.Paper.Throughput/out.Capacity)
	for _, row := range append(append([]modelPredictRow(nil), out.Plait...), out.Best...) {
		p := row.Prediction
		paths := strings.Join(row.Paths, ",")
		if row.Weights != nil && row.Model == "best" {
			paths += " " + modelWeights(row.Weights)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\t%.0f%%\t%.1f%%\n", row.Model, row.Mode, paths,
			modelRate(p.Goodput), 100*p.Goodput/out.Capacity, p.Limit, modelSeconds(p.RTT), modelSeconds(p.Skew),
			100*p.ReorderedRatio, 100*p.Spurious)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range out.Assumptions {
		fmt.Fprintf(w, "assumes: %s\n", a)
	}
	return nil
}

// modelWeights prints weights as small whole ratios when they are rates.
func modelWeights(ws []float64) string {
	var lo float64
	for _, x := range ws {
		if x > 0 && (lo == 0 || x < lo) {
			lo = x
		}
	}
	parts := make([]string, len(ws))
	for i, x := range ws {
		parts[i] = strconv.FormatFloat(x/lo, 'g', 3, 64)
	}
	return "(" + strings.Join(parts, ":") + ")"
}
