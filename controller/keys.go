package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pb "github.com/plait/plait/api/plait/v1"
)

// giveKeys installs the network file's tunnel keys on an agent that has just connected,
// over its API connection (mutual TLS off loopback), on each of its tunnels whose key ids
// differ from the file's; list is updated to what the agent holds then. A tunnel that
// cannot take them (one added without authentication) is reported, and the rest go on.
// The keys travel only in the request: the controller never logs, prints or returns
// them (Keys prints ids), and the agent answers with ids.
func (c *Controller) giveKeys(ctx context.Context, name string, cl pb.AgentClient, list *pb.ListTunnelsResponse) error {
	var errs []error
	for _, t := range c.net.Tunnels {
		if len(t.Keys) == 0 || t.Hosts[0] != name && t.Hosts[1] != name {
			continue
		}
		for i, at := range list.Tunnels {
			if at.Config.Id != t.ID || slices.Equal(at.Config.GetAuth().GetKeyIds(), t.Keys.IDs()) {
				continue
			}
			req := &pb.SetKeysRequest{TunnelId: t.ID}
			for _, k := range t.Keys {
				req.Keys = append(req.Keys, k[:])
			}
			got, err := cl.SetKeys(ctx, req)
			if err != nil {
				errs = append(errs, fmt.Errorf("keys of tunnel %d: %w", t.ID, err))
				continue
			}
			list.Tunnels[i] = got
			c.opts.log.Info("keys given", "agent", name, "tunnel", t.ID, "key_ids", t.Keys.IDs())
		}
	}
	return errors.Join(errs...)
}
