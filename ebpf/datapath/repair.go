package datapath

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/ringbuf"
)

// Gap is a run of path_seqs that did not arrive on one path of a tunnel slot, as the
// receiver reports it on a tunnel with repair on (Receiver.Repair).
type Gap struct {
	Slot  uint32
	Path  uint8
	First uint32 // the first missing path_seq
	Count uint32 // how many in a row
	// OwdNs is the one-way delay of the packet that showed the gap, on the scale of the
	// receiver's delay statistics: that packet queued behind what the lost one met.
	OwdNs int64
}

// GapReader reads the receiver's gap reports (every tunnel's) as they come.
type GapReader struct{ r *ringbuf.Reader }

// Gaps opens the reader of the receiver's gap reports; one reader takes each report.
func (d *Datapath) Gaps() (*GapReader, error) {
	r, err := ringbuf.NewReader(d.rcv.RcvGaps)
	if err != nil {
		return nil, fmt.Errorf("read the receiver's gap reports: %w", err)
	}
	return &GapReader{r}, nil
}

// Read waits for the next report; after Close it returns an error (ringbuf.ErrClosed).
func (g *GapReader) Read() (Gap, error) {
	rec, err := g.r.Read()
	if err != nil {
		return Gap{}, err
	}
	var v receiverRxGap
	if _, err := binary.Decode(rec.RawSample, binary.NativeEndian, &v); err != nil {
		return Gap{}, fmt.Errorf("gap report of %d bytes: %w", len(rec.RawSample), err)
	}
	return Gap{Slot: v.Slot, Path: uint8(v.Path), First: v.First, Count: v.Count, OwdNs: v.OwdNs}, nil
}

// Close ends Read.
func (g *GapReader) Close() error { return g.r.Close() }
