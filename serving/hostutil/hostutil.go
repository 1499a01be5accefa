// Package hostutil holds the serving agent's host facts (spec §1.17): the address it
// advertises (get_local_ip), whether a local port accepts connections, the available
// memory reported by GetResource, and sub-model name parsing.
package hostutil

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/serving/config"
)

// MemInfo is where AvailableMemory reads MemAvailable.
const MemInfo = "/proc/meminfo"

// LocalIP is the reference's get_local_ip: MY_HOST_IP, else the address the hostname
// resolves to, unless that is empty, "localhost" or 127.0.0.1; then the source address of
// a UDP "connection" to 8.8.8.8:80 (no packet is sent); else "localhost".
func LocalIP(env config.Env) string {
	ip, ok := env(config.EnvHostIP)
	if !ok || ip == "" {
		if h, err := os.Hostname(); err == nil {
			if addrs, err := net.LookupHost(h); err == nil && len(addrs) > 0 {
				ip = addrs[0]
			}
		}
	}
	if ip != "" && ip != "localhost" && ip != "127.0.0.1" {
		return ip
	}
	if c, err := net.Dial("udp", "8.8.8.8:80"); err == nil {
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok {
			return a.IP.String()
		}
	}
	return "localhost"
}

// CheckPortOpen reports whether 127.0.0.1:port accepts a TCP connection.
func CheckPortOpen(ctx context.Context, port int) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// AvailableMemory is the host's available memory in bytes (MemAvailable of /proc/meminfo;
// the reference's psutil "available").
func AvailableMemory() (int64, error) { return availableMemory(MemInfo) }

func availableMemory(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("serving/hostutil: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemAvailable" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("serving/hostutil: %s: MemAvailable %q is not \"N kB\"", path, strings.TrimSpace(v))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || n > (1<<53) {
			return 0, fmt.Errorf("serving/hostutil: %s: MemAvailable %q", path, f[0])
		}
		return n * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("serving/hostutil: %s: %w", path, err)
	}
	return 0, fmt.Errorf("serving/hostutil: %s has no MemAvailable line", path)
}

// ParseSubModelName splits "ps_3" into ("ps", 3); a name without '_' is index 0, as in the
// reference's pasre_sub_model_name. The index must be a non-negative integer.
func ParseSubModelName(name string) (kind string, index int, err error) {
	kind, idx, ok := strings.Cut(name, "_")
	if !ok {
		return name, 0, nil
	}
	index, err = strconv.Atoi(idx)
	if err != nil || index < 0 {
		return "", 0, fmt.Errorf("serving/hostutil: sub-model %q: index %q is not a non-negative integer", name, idx)
	}
	return kind, index, nil
}
