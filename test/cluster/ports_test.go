package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
)

func TestFreePortHandsOutBindablePortsOutsideTheEphemeralRangeOnce(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < portsFrom || port > portsTo {
			t.Fatalf("port %d outside %d-%d", port, portsFrom, portsTo)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
	// A port handed out is free to bind.
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("binding the port handed out: %v", err)
	}
	_ = l.Close()
}
