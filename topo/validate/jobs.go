package validate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

// ADAJob is the job of running base with its delays spread to average delay asymmetry
// ada (see adaScenario), in base's ADA sweep.
func ADAJob(base *scenario.Scenario, ada time.Duration) Job {
	s := adaScenario(base, ada)
	return Job{Group: GroupADA + base.Name, Label: fmtADA(ada), Name: s.Name, Scenario: s}
}

// adaScenario is base with its paths' one-way delays spread by model.Spread from the
// smallest of them to average delay asymmetry ada (eq. 22), each path keeping its rank:
// the rates, queues and traffic stay, only the delay asymmetry changes.
func adaScenario(base *scenario.Scenario, ada time.Duration) *scenario.Scenario {
	s := *base
	s.Paths = slices.Clone(base.Paths)
	s.Compare = slices.Clone(base.Compare)
	order := make([]int, len(s.Paths))
	lo := s.Paths[0].Delay
	for i, p := range s.Paths {
		order[i] = i
		lo = min(lo, p.Delay)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(base.Paths[a].Delay, base.Paths[b].Delay) })
	ds := model.Spread(len(order), lo.Seconds(), ada.Seconds())
	for rank, i := range order {
		s.Paths[i].Delay = time.Duration(math.Round(ds[rank]*1e6)) * time.Microsecond
	}
	s.Name = fmt.Sprintf("%s-ada%s", base.Name, fmtADA(ada))
	s.Description = fmt.Sprintf("%s with its delays spread from %v to an ADA of %v", base.Name, lo, ada)
	return &s
}

func fmtADA(ada time.Duration) string {
	return fmt.Sprintf("%gms", float64(ada)/float64(time.Millisecond))
}

// JobsFrom reads the runs --from names: a summary.json (or its folder), or a
// validate.json, whose points' runs keep their group and label.
func JobsFrom(name string) ([]Job, error) {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		for _, f := range []string{"summary.json", "validate.json"} {
			if _, err := os.Stat(filepath.Join(name, f)); err == nil {
				name = filepath.Join(name, f)
				break
			}
		}
	}
	name, err := filepath.Abs(name)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	var probe struct {
		Figure string  `json:"figure"`
		Points []Point `json:"points"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("--from %s: %w", name, err)
	}
	if probe.Figure != "validate" {
		return []Job{{Group: GroupRuns, Summary: name}}, nil
	}
	var jobs []Job
	seen := map[string]bool{}
	for _, p := range probe.Points {
		for _, f := range append([]string{p.Summary}, p.Pooled...) {
			if !seen[f] {
				seen[f] = true
				jobs = append(jobs, Job{Group: p.Group, Label: p.Label, Summary: f})
			}
		}
	}
	return jobs, nil
}
