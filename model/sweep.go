package model

import (
	_ "embed"
	"errors"
	"fmt"
	"time"
)

// PlotScript draws a sweep or a validation as PNG: `python3 - data.json out.png` with it
// on stdin. It needs matplotlib (Debian: python3-matplotlib) and exits with status 3
// without it.
//
//go:embed plot.py
var PlotScript []byte

// SweepSpec is a sweep in the style of seed 002's Figs. 7 and 8: every combination of
// minimum delay, link count, ADA and ABA. Link i (from 0) of n gets delay
// MinDelay + i·3·ADA/(n+1) and rate MinRate + i·3·ABA/(n+1): evenly spaced values with
// exactly the given average asymmetry (eqs. 22–23), the slowest link also the widest.
type SweepSpec struct {
	Figure    int // 7 (ADA × ABA) or 8 (ADA per minimum delay); only the plot uses it
	Links     []int
	MinDelays []time.Duration
	MinRate   float64 // bit/s
	ADAs      []time.Duration
	ABAs      []float64 // bit/s
	Paper     PaperOptions
	TCP       TCP
	Queue     int // per link, packets; 0: the default
}

// SweepPoint is one point of a sweep; rates in bit/s, times in seconds.
type SweepPoint struct {
	Links     int     `json:"links"`
	MinDelay  float64 `json:"min_delay_s"`
	ADA       float64 `json:"ada_s"`
	ABA       float64 `json:"aba_bps"`
	Capacity  float64 `json:"capacity_bps"`
	Paper     float64 `json:"paper_bps"`  // seed 002's model (rr)
	Plait     float64 `json:"plait_bps"`  // Predict, rr over all links
	Best      float64 `json:"best_bps"`   // BestSubset under rr
	BestLinks int     `json:"best_links"` // how many links BestSubset keeps
}

// Spread returns n evenly spaced values from lo whose average pairwise difference is asym.
func Spread(n int, lo, asym float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo + float64(i)*3*asym/float64(n+1)
	}
	return out
}

// Sweep runs both models over the spec.
func Sweep(spec SweepSpec) ([]SweepPoint, error) {
	if len(spec.Links) == 0 || len(spec.MinDelays) == 0 || len(spec.ADAs) == 0 || len(spec.ABAs) == 0 {
		return nil, errors.New("sweep: links, minimum delays, ADAs and ABAs each need at least one value")
	}
	if !(spec.MinRate > 0) {
		return nil, fmt.Errorf("sweep: minimum rate %v bit/s must be positive", spec.MinRate)
	}
	var out []SweepPoint
	for _, md := range spec.MinDelays {
		for _, n := range spec.Links {
			if n < 1 || n > MaxSubsetPaths {
				return nil, fmt.Errorf("sweep: %d links: give 1 to %d", n, MaxSubsetPaths)
			}
			for _, ada := range spec.ADAs {
				for _, aba := range spec.ABAs {
					if ada < 0 || aba < 0 {
						return nil, fmt.Errorf("sweep: ADA %v and ABA %v must not be negative", ada, aba)
					}
					pt, err := sweepPoint(spec, n, md, ada, aba)
					if err != nil {
						return nil, err
					}
					out = append(out, pt)
				}
			}
		}
	}
	return out, nil
}

func sweepPoint(spec SweepSpec, n int, md, ada time.Duration, aba float64) (SweepPoint, error) {
	delays := Spread(n, md.Seconds(), ada.Seconds())
	rates := Spread(n, spec.MinRate, aba)
	paths := make([]Path, n)
	pt := SweepPoint{Links: n, MinDelay: md.Seconds(), ADA: ada.Seconds(), ABA: aba}
	for i := range paths {
		paths[i] = Path{Rate: rates[i], Delay: time.Duration(delays[i] * 1e9), Queue: spec.Queue}
		pt.Capacity += rates[i]
	}
	paper, err := Paper(paths, spec.Paper)
	if err != nil {
		return pt, fmt.Errorf("sweep: %w", err)
	}
	plait, err := Predict(paths, Split{Mode: RR}, spec.TCP)
	if err != nil {
		return pt, fmt.Errorf("sweep: %w", err)
	}
	best, err := BestSubset(paths, RR, spec.TCP)
	if err != nil {
		return pt, fmt.Errorf("sweep: %w", err)
	}
	pt.Paper, pt.Plait, pt.Best, pt.BestLinks = paper.Throughput, plait.Goodput, best.Prediction.Goodput, len(best.Paths)
	return pt, nil
}
