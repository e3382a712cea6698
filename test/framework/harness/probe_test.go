package harness

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// RebindPort's port is outside the kernel's ephemeral range, so no
// connection's source port and no FreePort can take it between two lives
// of a supervised process, and it is free when handed out.
func TestRebindPortIsBelowTheEphemeralRange(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ip_local_port_range here: %v", err)
	}
	low, err := strconv.Atoi(strings.Fields(string(data))[0])
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		port, err := RebindPort()
		if err != nil {
			t.Fatal(err)
		}
		if low > 11000 && port >= low {
			t.Fatalf("port %d is in the ephemeral range from %d", port, low)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("port %d handed out but not free: %v", port, err)
		}
		_ = l.Close()
	}
}
