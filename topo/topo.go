// Package topo carries Plait's Mininet lab (the Python files beside it) and the shipped
// scenario files inside the plait binary, so that `plait lab` needs no checkout: the
// lab's Python is written to a temporary folder and run with the system python3, where
// Debian's Mininet lives. The Go side of the lab is here too: the plan the Python reads
// (plan.go: the scenario in plain units, the single-best path) and running it (run.go).
// Docs: docs/lab.md.
package topo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed *.py scenarios/*.yaml
var files embed.FS

// Python is the interpreter the lab runs on: Debian's mininet package installs into the
// system Python only.
const Python = "/usr/bin/python3"

// Extract writes the lab's Python files into dir and returns the path of its entry point.
func Extract(dir string) (string, error) {
	names, err := fs.Glob(files, "*.py")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return "", fmt.Errorf("write lab file: %w", err)
		}
	}
	return filepath.Join(dir, "lab.py"), nil
}

// Scenarios lists the shipped scenarios by name (the file name without .yaml).
func Scenarios() []string {
	names, _ := fs.Glob(files, "scenarios/*.yaml")
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, strings.TrimSuffix(filepath.Base(n), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Scenario returns a shipped scenario file by name, case-insensitive, with or without
// .yaml: "A2", "s1-4", "default".
func Scenario(name string) ([]byte, bool) {
	n := strings.ToLower(strings.TrimSuffix(name, ".yaml"))
	if strings.ContainsAny(n, "/\\") {
		return nil, false
	}
	b, err := files.ReadFile("scenarios/" + n + ".yaml")
	return b, err == nil
}
