package nstest

import (
	"os"
	"testing"
)

func TestVethPing(t *testing.T) {
	a, b := New(t, "a"), New(t, "b")
	Veth(t, a, "eth0", b, "eth0")
	a.Addr("eth0", "10.200.0.1/24")
	b.Addr("eth0", "10.200.0.2/24")
	a.Run("ping", "-c", "1", "-W", "2", "10.200.0.2")
	if err := a.Do(func() error {
		_, err := os.Stat("/proc/self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
