package discovery

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseServers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"h1:2181,h2:2182", []string{"h1:2181", "h2:2182"}, ""},
		{" h1 , h2:1 ,", []string{"h1:2181", "h2:1"}, ""},
		{"127.0.0.1", []string{"127.0.0.1:2181"}, ""},
		{"[::1]:2181,::1", []string{"[::1]:2181", "[::1]:2181"}, ""},
		{"", nil, "no ZooKeeper servers"},
		{" , ", nil, "no ZooKeeper servers"},
		{"h1:2181/monolith", nil, "chroot"},
		{"h1:x", nil, "not host:port"},
		{":2181", nil, "not host:port"},
		{"h1:0", nil, "not host:port"},
	} {
		got, err := ParseServers(tc.in)
		if tc.err != "" {
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseServers(%q) = %v, %v; want an error mentioning %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseServers(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestStatic(t *testing.T) {
	in := []string{"ps0:9000", "[::1]:9001"}
	got, err := Static(in)
	if err != nil || !slices.Equal(got, in) {
		t.Fatalf("Static = %q, %v", got, err)
	}
	got[0] = "changed"
	if in[0] != "ps0:9000" {
		t.Error("Static does not copy")
	}
	for _, bad := range [][]string{nil, {"ps0:9000", ""}, {"ps0"}, {"ps0:port"}} {
		if _, err := Static(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Static(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
