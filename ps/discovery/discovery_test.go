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

func TestNodeNames(t *testing.T) {
	if got := NodeName(7); got != "shard-00007" {
		t.Errorf("NodeName(7) = %q", got)
	}
	for name, want := range map[string]int{"shard-00000": 0, "shard-00042": 42, "shard-99999": 99999} {
		if got, ok := parseNodeName(name); !ok || got != want {
			t.Errorf("parseNodeName(%q) = %d, %t", name, got, ok)
		}
	}
	for _, name := range []string{"shard-1", "shard-0001", "shard--0001", "shard-000001", "shard-0000a", "other", "shard-"} {
		if _, ok := parseNodeName(name); ok {
			t.Errorf("parseNodeName(%q) accepted", name)
		}
	}
}

func TestParseNode(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		err        string
	}{
		{"shard-00001", `{"shard":1,"num_shards":3,"addr":"h:1"}`, ""},
		{"shard-00001", `{"addr":"h:1","num_shards":3,"shard":1,"extra":true}`, ""},
		{"shard-00001", `{"shard":1,"num_shards":3`, "malformed JSON"},
		{"shard-00001", `{"shard":1,"num_shards":3}`, "lacks"},
		{"shard-00001", `{"shard":2,"num_shards":3,"addr":"h:1"}`, "shard 2 in the data"},
		{"shard-00001", `{"shard":1,"num_shards":4,"addr":"h:1"}`, "num_shards 4"},
		{"shard-00003", `{"shard":3,"num_shards":3,"addr":"h:1"}`, "out of range"},
		{"shard-00001", `{"shard":1,"num_shards":3,"addr":"h"}`, "address"},
		{"shard-00001", `{"shard":"1","num_shards":3,"addr":"h:1"}`, "malformed JSON"},
		{"node", `{"shard":1,"num_shards":3,"addr":"h:1"}`, "not shard-NNNNN"},
	} {
		n, err := parseNode(tc.name, []byte(tc.data), 3)
		if tc.err == "" {
			if err != nil || n != (Node{Shard: 1, NumShards: 3, Addr: "h:1"}) {
				t.Errorf("parseNode(%s) = %+v, %v", tc.data, n, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseNode(%s, %s) = %v, want an error mentioning %q", tc.name, tc.data, err, tc.err)
		}
	}
}

func TestCheckRoot(t *testing.T) {
	for _, ok := range []string{"/ps", "/monolith/ps/model-1"} {
		if err := checkRoot(ok); err != nil {
			t.Errorf("checkRoot(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/", "ps", "/ps/", "/a//b"} {
		if err := checkRoot(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("checkRoot(%q) = %v", bad, err)
		}
	}
}
