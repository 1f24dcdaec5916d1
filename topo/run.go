package topo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Run runs the lab's Python with python: verb run or up on plan, or clean (plan nil).
// Its output goes to stdout and stderr; it reads the terminal (up opens Mininet's CLI).
// Ctrl-C reaches the Python process too (same process group); it cleans up and exits,
// and Run waits for it (ctx's end only passes an interrupt on, it does not kill).
func Run(ctx context.Context, python, verb string, plan *Plan, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "plait-lab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	planFile := ""
	if plan != nil {
		planFile = filepath.Join(dir, "plan.json")
		if err := plan.writeIdeal(dir); err != nil {
			return err
		}
		b, err := json.MarshalIndent(plan, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(planFile, b, 0o644); err != nil {
			return err
		}
	}
	return runPython(ctx, python, dir, verb, planFile, stdout, stderr)
}

// runPython runs the lab's Python, extracted into dir.
func runPython(ctx context.Context, python, dir, verb, plan string, stdout, stderr io.Writer) error {
	if _, err := os.Stat(python); err != nil {
		return fmt.Errorf("%s not found: the lab runs on the system Python with Debian's mininet (apt-get install python3 mininet, or make deps)", python)
	}
	check := exec.Command(python, "-c", "import mininet.net, matplotlib, yaml")
	if out, err := check.CombinedOutput(); err != nil {
		return fmt.Errorf("%s cannot import mininet, matplotlib and yaml (%s): apt-get install mininet python3-matplotlib python3-yaml, or make deps",
			python, strings.TrimSpace(lastLine(string(out))))
	}
	entry, err := Extract(dir)
	if err != nil {
		return err
	}
	args := []string{"-u", entry, verb}
	if plan != "" {
		args = append(args, "--plan", plan)
	}
	c := exec.Command(python, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
	c.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if verb != "up" {
		// Its own process group: a terminal's Ctrl-C reaches only this process, which
		// passes exactly one SIGINT on, so the lab's clean-up is not interrupted twice.
		// (up keeps the terminal's group: Mininet's CLI reads it and takes Ctrl-C.)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("run the lab: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			if verb != "up" {
				c.Process.Signal(os.Interrupt)
			}
		case <-done:
		}
	}()
	err = c.Wait()
	close(done)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("lab %s failed (exit %d)", verb, ee.ExitCode())
		}
		return fmt.Errorf("run the lab: %w", err)
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
