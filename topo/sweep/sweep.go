package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
)

// Options of a sweep.
type Options struct {
	Seed     uint64
	N        int
	Duration time.Duration
	Ranges   Ranges
	Results  string // the sweep goes to Results/sweep-<seed>/<time>/
	DrawOnly bool   // write the scenario files, run nothing
	Python   string // the lab's interpreter (topo.Python), also for the plot
	Command  string // how the sweep was called, for the report
	Progress io.Writer
	Stderr   io.Writer // the lab's errors, also kept in its log
	// Resequence and Repair, when set, go into every drawn scenario's file (as a
	// scenario's resequence and repair): the same draw measured with a mechanism on or off.
	Resequence, Repair string

	inherited bool // the lock came with the process (see Run)
}

// LockFile serialises lab runs on this machine: the labs use fixed namespace and device
// names and a fixed run folder, so two at once break each other.
const LockFile = "/tmp/plait-lab.lock"

// Run draws the ensemble, writes its files, runs every scenario in the lab one at a time,
// and writes sweep.json, sweep.md and sweep.png as it goes (a sweep cut short keeps what
// it measured). It returns the sweep's folder.
func Run(ctx context.Context, o Options) (string, error) {
	drawn, err := Draw(o.Ranges, o.Seed, o.N, o.Duration)
	if err != nil {
		return "", err
	}
	for i := range drawn {
		if err := drawn[i].set(o.Resequence, o.Repair); err != nil {
			return "", err
		}
	}
	if !o.DrawOnly && os.Geteuid() != 0 {
		return "", errors.New("the lab needs root (network namespaces, eBPF, raw sockets): run the sweep with sudo")
	}
	dir, err := filepath.Abs(filepath.Join(o.Results, fmt.Sprintf("sweep-%d", o.Seed), time.Now().Format("20060102-150405")))
	if err != nil {
		return "", err
	}
	for _, d := range []string{"scenarios", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	p := o.Progress
	fmt.Fprintf(p, "== sweep seed %d: %d scenarios of %v each, in %s\n   drawn from:\n", o.Seed, o.N, o.Duration, dir)
	for _, l := range strings.Split(strings.TrimSpace(o.Ranges.String()), "\n") {
		fmt.Fprintf(p, "     %s\n", l)
	}
	rep := &Report{Seed: o.Seed, N: o.N, Duration: o.Duration.Seconds(), Ranges: o.Ranges.String(), Configs: Compare,
		PlaitVersion: topo.Revision(), CPUs: runtime.NumCPU(), Command: o.Command, Started: time.Now().UTC().Format(time.RFC3339)}
	files := make([]string, len(drawn))
	for i, d := range drawn {
		files[i] = filepath.Join(dir, "scenarios", d.Name+".yaml")
		if err := os.WriteFile(files[i], d.YAML, 0o644); err != nil {
			return dir, err
		}
	}
	if o.DrawOnly {
		fmt.Fprintf(p, "== %d scenario files in %s/scenarios (run one with plait lab run FILE)\n", len(drawn), dir)
		return dir, nil
	}
	// Under flock(1) this process holds the lock through a file it inherited: taking it
	// again would wait forever. Checked once, before the sweep opens the file itself.
	if inheritedLock(LockFile) {
		fmt.Fprintf(p, "   (%s is held by the command that started the sweep: other lab runs wait for all of it)\n", LockFile)
		o.inherited = true
	}
	start := time.Now()
	for i, d := range drawn {
		if ctx.Err() != nil {
			break
		}
		s := d.Scenario
		r := Result{Name: d.Name, File: files[i], LossFree: d.LossFree, CC: s.Traffic.CC, Flows: s.Traffic.Flows, Paths: s.Paths}
		eta := ""
		if i > 0 {
			eta = fmt.Sprintf(", about %v left", (time.Since(start) / time.Duration(i) * time.Duration(len(drawn)-i)).Round(time.Minute))
		}
		fmt.Fprintf(p, "== [%d/%d] %s: %s%s\n", i+1, len(drawn), d.Name, strings.TrimPrefix(s.Description, "drawn, "), eta)
		r.Results, r.Load, r.Seconds, err = runOne(ctx, o, d, filepath.Join(dir, "runs"), filepath.Join(dir, "logs", d.Name+".log"))
		if err == nil {
			err = r.read()
		}
		if err != nil {
			r.Error = err.Error()
			fmt.Fprintf(p, "   failed: %v (log: %s)\n", err, filepath.Join(dir, "logs", d.Name+".log"))
		} else {
			fmt.Fprintf(p, "   auto/ideal %s, auto/single-best %s, auto/mptcp %s  (%.0fs)\n",
				num(r.Ratio(VsIdeal)), num(r.Ratio(VsSingleBest)), num(r.Ratio(VsMPTCP)), r.Seconds)
		}
		if ctx.Err() == nil || err == nil {
			rep.Results = append(rep.Results, r)
		}
		if err := rep.Write(dir); err != nil {
			return dir, err
		}
	}
	rep.Finished = time.Now().UTC().Format(time.RFC3339)
	end := loadAvg()
	rep.LoadEnd = end[:]
	if err := rep.Write(dir); err != nil {
		return dir, err
	}
	fmt.Fprintf(p, "\n%s\n", DistributionTable(rep.Distribution))
	if err := Plot(o.Python, dir); err != nil {
		fmt.Fprintf(p, "   no plot: %v\n", err)
	}
	fmt.Fprintf(p, "== results in %s (sweep.json, sweep.md, sweep.png; scenarios/, runs/, logs/)\n", dir)
	if ctx.Err() != nil {
		return dir, fmt.Errorf("sweep interrupted after %d of %d scenarios", len(rep.Results), len(drawn))
	}
	return dir, nil
}

// runOne runs one drawn scenario holding the lab lock only for its own run, so that
// other people's lab runs on a shared machine interleave with a long sweep instead of
// waiting for all of it. The lab's output goes to logFile; its progress lines also to
// the sweep's.
func runOne(ctx context.Context, o Options, d Drawn, results, logFile string) (string, [3]float64, float64, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return "", [3]float64{}, 0, err
	}
	defer log.Close()
	if !o.inherited {
		unlock, err := lockLab(ctx, LockFile, o.Progress)
		if err != nil {
			return "", [3]float64{}, 0, err
		}
		defer unlock()
	}
	load := loadAvg()
	t0 := time.Now()
	plan, err := topo.BuildPlan(d.Scenario, d.Name, results)
	if err != nil {
		return "", load, 0, err
	}
	plan.Repeat = 1
	err = topo.Run(ctx, o.Python, "run", plan, io.MultiWriter(log, &progressLines{w: o.Progress}), io.MultiWriter(log, o.Stderr))
	return plan.Out, load, time.Since(t0).Seconds(), err
}

// lockLab takes path with flock(2), waiting (and saying so) while another lab run holds
// it.
func lockLab(ctx context.Context, path string, progress io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab lock: %w", err)
	}
	// A blocking flock(2) queues with the other waiters (flock(1) blocks too); polling
	// with LOCK_NB would lose every race to them on a busy machine.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return func() { f.Close() }, nil
	}
	fmt.Fprintf(progress, "   waiting for %s: another lab run holds it\n", path)
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lab lock %s: %w", path, err)
		}
	case <-ctx.Done():
		go func() { <-got; f.Close() }() // the wait cannot be cut short: let go once it ends
		return nil, ctx.Err()
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

// inheritedLock tells whether this process has path open already: a file it inherited.
func inheritedLock(path string) bool {
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if t, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && t == path {
			return true
		}
	}
	return false
}

func loadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(b))[:3] {
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}

// read fills r's figures from its lab run's summary.json.
func (r *Result) read() error {
	b, err := os.ReadFile(filepath.Join(r.Results, "summary.json"))
	if err != nil {
		return fmt.Errorf("the lab run wrote no summary: %w", err)
	}
	var sum struct {
		Configs []struct {
			Config    string  `json:"config"`
			Goodput   float64 `json:"goodput_bps"`
			Emulation *struct {
				Sent  float64 `json:"sent"`
				Late5 float64 `json:"late_5ms"`
			} `json:"emulation"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		return fmt.Errorf("%s/summary.json: %w", r.Results, err)
	}
	r.Goodput = map[string]float64{}
	for _, c := range sum.Configs {
		r.Goodput[c.Config] = c.Goodput
		if c.Config == scenario.ConfigAuto && c.Emulation != nil && c.Emulation.Sent > 0 {
			late := c.Emulation.Late5 / c.Emulation.Sent
			r.Late = &late
		}
	}
	return nil
}

// progressLines passes on the lab's lines that say which configuration runs and what it
// got (lab.py's "== [k/n]" and result lines), indented under the sweep's own.
type progressLines struct {
	w   io.Writer
	buf []byte
}

func (p *progressLines) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.buf[:i])
		p.buf = p.buf[i+1:]
		if strings.HasPrefix(line, "== [") || strings.HasPrefix(line, "   goodput") || strings.HasPrefix(line, "   warning") {
			fmt.Fprintf(p.w, "   %s\n", line)
		}
	}
}

// Plot draws sweep.png from dir's sweep.json with the lab's report.py (matplotlib).
func Plot(python, dir string) error {
	tmp, err := os.MkdirTemp("", "plait-sweep-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := topo.Extract(tmp); err != nil {
		return err
	}
	c := exec.Command(python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import report; report.plot_sweep(sys.argv[2])", tmp, dir)
	c.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s report.plot_sweep: %v: %s", python, err, strings.TrimSpace(string(out)))
	}
	return nil
}
