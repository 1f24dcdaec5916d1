package model

import (
	"testing"
)

// The S1 links I…VIII of seed 002 with LTE-like one-way delays: the controller's worst
// case, eight paths every ~100 ms.
var benchPaths = []Path{
	{Rate: 35.9e6, Delay: ms(22)}, {Rate: 18.4e6, Delay: ms(35)}, {Rate: 33.3e6, Delay: ms(28)},
	{Rate: 14.7e6, Delay: ms(51)}, {Rate: 14.8e6, Delay: ms(40)}, {Rate: 4.4e6, Delay: ms(75), Loss: 0.001},
	{Rate: 22.5e6, Delay: ms(33)}, {Rate: 12.5e6, Delay: ms(60)},
}

func BenchmarkPredict8(b *testing.B) {
	for _, mode := range []Mode{RR, WRR, EDPF} {
		b.Run(mode.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := Predict(benchPaths, Split{Mode: mode}, TCP{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBestSubset8(b *testing.B) {
	for _, mode := range []Mode{RR, WRR, EDPF} {
		b.Run(mode.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := BestSubset(benchPaths, mode, TCP{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPaper8(b *testing.B) {
	for b.Loop() {
		if _, err := Paper(benchPaths, PaperOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
