package validate

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/wire"
)

// labTCP is the flow of a lab configuration as the predictor sees it: the scenario's
// congestion control, duration, omitted start and TCP knobs, and the MSS and per-packet
// wire bytes of plain TCP (ideal, single-best) or of the tunnel: compact in the parallel
// shape (in UDP or IP); in the split shape the hosts send 1500-byte packets and the
// switches add encapsulation and telemetry.
func labTCP(sum *labSummary, config string) (model.TCP, error) {
	cc, err := model.ParseCC(sum.Traffic.CC)
	if err != nil {
		return model.TCP{}, err
	}
	t := model.TCP{CC: cc, MSS: topo.PlainMSS, Overhead: topo.PlainOverhead,
		Duration: seconds(sum.Traffic.Duration), Omit: seconds(sum.Traffic.Omit)}
	switch {
	case config != scenario.ConfigRR && config != scenario.ConfigWRR:
	case sum.Shape == scenario.ShapeSplit:
		t.Overhead += wire.EncapLen + wire.TelemetryLen
	default:
		o := wire.Overhead(sum.Encap == scenario.EncapIP, true)
		t.MSS -= o
		t.Overhead += o
	}
	return t.WithSysctls(sum.Traffic.TCP), nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func modelPath(l topo.Link) model.Path {
	return model.Path{Name: l.Name, Rate: l.Rate, Delay: time.Duration(l.Delay), Jitter: time.Duration(l.Jitter), Loss: l.Loss, Queue: l.Queue}
}

// points puts both models beside each measured configuration of a lab run that
// they predict (only those of compare, when given).
func points(sum *labSummary, file, group, label string, compare []string, po model.PaperOptions, set PaperSet) ([]Point, error) {
	paths := make([]model.Path, len(sum.Paths))
	for i, l := range sum.Paths {
		paths[i] = modelPath(l)
	}
	if label == "" {
		label = sum.Scenario
	}
	var out []Point
	for _, r := range sum.Configs {
		if !slices.Contains(Configs, r.Config) || (len(compare) > 0 && !slices.Contains(compare, r.Config)) {
			continue
		}
		if r.Error != "" || !(r.Goodput > 0) {
			return nil, fmt.Errorf("%s measured no goodput (%s): nothing to compare", r.Config, r.Error)
		}
		tcp, err := labTCP(sum, r.Config)
		if err != nil {
			return nil, err
		}
		p := Point{Group: group, Label: label, Scenario: sum.Scenario, Links: len(paths),
			ADA: model.ADA(paths), ABA: model.ABA(paths), Config: r.Config, Measured: r.Goodput,
			Runs: r.Runs, Retransmits: r.Retransmits, Summary: file}
		if len(r.Runs) > 1 {
			worst := 1.0
			for _, x := range r.Runs {
				worst = min(worst, model.Accuracy(x, r.Goodput))
			}
			p.Repeat = &worst
		}
		if e := r.Emulation; e != nil && e.Sent > 0 {
			late := e.Late5 / e.Sent
			p.Late = &late
		}
		var pred model.Prediction
		switch r.Config {
		case scenario.ConfigIdeal:
			pred, err = model.Predict([]model.Path{modelPath(sum.Ideal)}, model.Split{}, tcp)
		case scenario.ConfigSingleBest:
			if sum.SingleBest.Index < 0 || sum.SingleBest.Index >= len(paths) {
				return nil, fmt.Errorf("single-best: path index %d of %d paths", sum.SingleBest.Index, len(paths))
			}
			pred, err = model.Predict(paths[sum.SingleBest.Index:sum.SingleBest.Index+1], model.Split{}, tcp)
		case scenario.ConfigRR:
			pred, err = model.Predict(paths, model.Split{Mode: model.RR}, tcp)
			if err == nil {
				p.Paper, err = paperCheck(paths, po, set, tcp, r.Goodput)
			}
		case scenario.ConfigWRR:
			// The lab's weights are the paths' rates, which is also Split's default.
			pred, err = model.Predict(paths, model.Split{Mode: model.WRR}, tcp)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Config, err)
		}
		p.Plait = Check{Predicted: pred.Goodput, Accuracy: model.Accuracy(r.Goodput, pred.Goodput)}
		p.Limit = pred.Limit
		out = append(out, p)
	}
	return out, nil
}

// paperCheck runs seed 002's model on the run: E is what the run moved (goodput over the
// whole duration) and s the tunnel's MSS, unless the user set them.
func paperCheck(paths []model.Path, po model.PaperOptions, set PaperSet, tcp model.TCP, measured float64) (*Check, error) {
	if !set.Bytes {
		po.Bytes = measured * tcp.Duration.Seconds() / 8
	}
	if !set.Segment {
		po.Segment = tcp.MSS
	}
	res, err := model.Paper(paths, po)
	if err != nil {
		return nil, fmt.Errorf("paper model: %w", err)
	}
	return &Check{Predicted: res.Throughput, Accuracy: model.Accuracy(measured, res.Throughput)}, nil
}
