// Package plaitv1 holds Plait's own gRPC APIs, generated from the .proto files beside
// it (make generate): Agent (host agent, docs/agent.md), Controller (operator API,
// docs/controller.md) and LinkEmulation (the embedded switch's links, docs/switch.md).
// P4Runtime itself comes from github.com/p4lang/p4runtime.
package plaitv1

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative agent.proto link.proto controller.proto
