package split

import (
	"bytes"
	"testing"
)

func TestSmoothInterleaves(t *testing.T) {
	slots, err := Smooth([]float64{1, 1, 2}, 8)
	if err != nil {
		t.Fatal(err)
	}
	// Smooth WRR never puts the heavy path twice in a row when it has half the share.
	want := []uint8{2, 0, 1, 2, 2, 0, 1, 2}
	if !bytes.Equal(slots, want) {
		t.Fatalf("Smooth(1,1,2) = %v, want %v", slots, want)
	}
	if _, err := Smooth([]float64{0, 0}, 8); err == nil {
		t.Fatal("all-zero weights accepted")
	}
}

// Every share is within one slot of exact, and the slots add up: S1-5's lanes iv and v
// (14.7 and 14.8 Mbit/s) both get 129 of 1024, iv's 0.35 % above its rate's share.
func TestApportionLargestRemainders(t *testing.T) {
	rates := []float64{35.9, 18.4, 33.3, 14.7, 14.8}
	shares, err := Apportion(rates, HostSlots)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{314, 161, 291, 129, 129}
	for i := range want {
		if shares[i] != want[i] {
			t.Fatalf("Apportion(S1-5) = %v, want %v", shares, want)
		}
	}
	if _, err := Apportion([]float64{1, -1}, 8); err == nil {
		t.Fatal("a negative weight accepted")
	}
}

// Weights whose sum overflows are refused; each alone as large as a float64 goes is not,
// and the table still follows their ratio.
func TestHugeWeights(t *testing.T) {
	if _, err := Apportion([]float64{1e308, 1e308}, HostSlots); err == nil {
		t.Fatal("weights summing past MaxFloat64 accepted")
	}
	shares, err := Apportion([]float64{1e307, 3e307}, HostSlots)
	if err != nil {
		t.Fatal(err)
	}
	if shares[0] != 256 || shares[1] != 768 {
		t.Fatalf("Apportion(1e307, 3e307) = %v, want [256 768]", shares)
	}
}
