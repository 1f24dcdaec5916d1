// Package plaitv1 holds Plait's own gRPC APIs: the host agent and the switch's link
// emulation (P4Runtime itself comes from github.com/p4lang/p4runtime).
package plaitv1

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative agent.proto link.proto controller.proto
