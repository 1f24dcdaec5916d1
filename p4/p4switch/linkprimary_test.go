package p4switch_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	plaitv1 "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/p4/p4switch"
)

// Link emulation obeys P4Runtime's primary: with none, a link change is taken (the
// endpoint's TLS is the access control); with one, only a call naming its election id.
func TestLinkChangesObeyThePrimary(t *testing.T) {
	r := newRig(t, 2)
	links := plaitv1.NewLinkEmulationClient(r.conn)
	down := true
	set := func(eid string) error {
		ctx := context.Background()
		if eid != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, p4switch.ElectionIDKey, eid)
		}
		_, err := links.SetLink(ctx, &plaitv1.SetLinkRequest{Port: 2, Params: &plaitv1.LinkParams{Down: &down}})
		return err
	}
	if err := set(""); err != nil {
		t.Fatalf("no primary: %v, want the change taken", err)
	}
	r.stream(t, 10)
	for eid, want := range map[string]codes.Code{"": codes.PermissionDenied, "9": codes.PermissionDenied, "0:10": codes.OK, "10": codes.OK, "x": codes.InvalidArgument} {
		if got := status.Code(set(eid)); got != want {
			t.Errorf("primary 10, link change with election id %q: %v, want %v", eid, got, want)
		}
	}
	if _, err := links.GetLinks(context.Background(), &plaitv1.GetLinksRequest{}); err != nil {
		t.Fatalf("reading links needs no election id: %v", err)
	}
}
