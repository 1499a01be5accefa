package server

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// procStatus is where the resident set size is read (spec/ps.md §7.7).
const procStatus = "/proc/self/status"

// readRSS returns VmRSS of /proc/self/status in bytes (kB × 1024).
func readRSS() (int64, error) {
	b, err := os.ReadFile(procStatus)
	if err != nil {
		return 0, fmt.Errorf("read resident set size: %w", err)
	}
	return parseVmRSS(b)
}

// parseVmRSS finds the "VmRSS:  1234 kB" line.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("read resident set size: malformed VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > (1<<63-1)/1024 {
			return 0, fmt.Errorf("read resident set size: malformed VmRSS line %q", sc.Text())
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("read resident set size: no VmRSS line in %s", procStatus)
}

// memoryHealth is Monolith's check_machine_health: OUT_OF_MEMORY (status 1) when the
// resident set reaches the limit.
func memoryHealth(rss, limit int64) (healthy bool, status int32, msg string) {
	if rss >= limit {
		return false, 1, fmt.Sprintf("Memory limit exceeded. Current: %d, Limit: %d", rss, limit)
	}
	return true, 0, ""
}
