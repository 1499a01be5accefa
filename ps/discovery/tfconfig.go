package discovery

import (
	"context"
	"encoding/json"
	"fmt"
)

// TFConfig is the TF_CONFIG (Primus) backend: a fixed cluster from the JSON
// {"cluster": {"chief": […], "ps": […], "worker": […]}, "task": {"type", "index"}}.
// Register and Deregister do nothing.
type TFConfig struct {
	cluster  map[string][]string
	taskType string
	index    int
}

// NewTFConfig parses a TF_CONFIG.
func NewTFConfig(js string) (*TFConfig, error) {
	var v struct {
		Cluster map[string][]string `json:"cluster"`
		Task    *struct {
			Type  string `json:"type"`
			Index *int   `json:"index"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		return nil, fmt.Errorf("%w: tf_config: %v", ErrInvalidArgument, err)
	}
	switch {
	case v.Task == nil || v.Task.Type == "" || v.Task.Index == nil:
		return nil, fmt.Errorf("%w: tf_config: task.type and task.index are required", ErrInvalidArgument)
	case *v.Task.Index < 0 || *v.Task.Index >= len(v.Cluster[v.Task.Type]):
		return nil, fmt.Errorf("%w: tf_config: task %s %d is not in cluster.%s (%d entries)", ErrInvalidArgument,
			v.Task.Type, *v.Task.Index, v.Task.Type, len(v.Cluster[v.Task.Type]))
	}
	for role, addrs := range v.Cluster {
		for i, a := range addrs {
			if err := checkAddr(a); err != nil {
				return nil, fmt.Errorf("%w: tf_config: cluster.%s[%d]: %w", ErrInvalidArgument, role, i, err)
			}
		}
	}
	return &TFConfig{cluster: v.Cluster, taskType: v.Task.Type, index: *v.Task.Index}, nil
}

// Identity: a chief is worker 0; workers are numbered after the chief when there is one.
func (t *TFConfig) Identity() Identity {
	id := Identity{ServerType: t.taskType, Index: t.index, Addr: t.cluster[t.taskType][t.index]}
	switch {
	case t.taskType == "chief":
		id.ServerType = "worker"
	case t.taskType == "worker" && len(t.cluster["chief"]) > 0:
		id.Index = t.index + 1
	}
	return id
}

// Register does nothing: the cluster is fixed.
func (*TFConfig) Register(context.Context, string, int, string) error { return nil }

// Deregister does nothing.
func (*TFConfig) Deregister(context.Context, string, int, string) error { return nil }

// Query returns "ps" by position, or "worker": the chief list then the workers.
func (t *TFConfig) Query(_ context.Context, name string) (map[int]string, error) {
	var list []string
	switch name {
	case "ps":
		list = t.cluster["ps"]
	case "worker":
		list = append(append(list, t.cluster["chief"]...), t.cluster["worker"]...)
	default:
		return nil, fmt.Errorf("%w: tf_config query %q (want ps or worker)", ErrInvalidArgument, name)
	}
	out := make(map[int]string, len(list))
	for i, a := range list {
		out[i] = a
	}
	return out, nil
}

// Close does nothing.
func (*TFConfig) Close() error { return nil }
