package train

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestOpsChangeTraining: a filter of the training config changes what is trained (fewer
// examples, other eval figures) and a label op changes the labels the model learns.
func TestOpsChangeTraining(t *testing.T) {
	dir := t.TempDir()
	base := plantedData(t, dir, 8000)
	run := func(t *testing.T, yaml string, eval bool) *Summary {
		t.Helper()
		c := *base
		extra, err := ParseConfig([]byte(yaml), true)
		if err != nil {
			t.Fatal(err)
		}
		c.Filters, c.Labels = extra.Filters, extra.Labels
		if err := c.Normalize(); err != nil {
			t.Fatal(err)
		}
		if !eval {
			c.EvalInput = "" // after Normalize, which derives it from data
		}
		sum, err := Run(context.Background(), &c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	plain := run(t, "{}", true)
	sampled := run(t, "filters: [{negative_sample: {drop_rate: 0.6, threshold: 0.5}}]", true)
	t.Logf("plain: %d examples, eval %d rows AUC %.4f; negative_sample: %d examples, eval %d rows AUC %.4f",
		plain.Examples, plain.EvalExamples, *plain.EvalAUC, sampled.Examples, sampled.EvalExamples, *sampled.EvalAUC)
	if plain.Examples != 2*8000 {
		t.Fatalf("plain run trained %d examples, want 16000", plain.Examples)
	}
	if sampled.Examples >= plain.Examples*9/10 || sampled.Examples <= plain.Examples/4 {
		t.Errorf("negative_sample(0.6) trained %d of %d examples", sampled.Examples, plain.Examples)
	}
	if sampled.EvalExamples >= plain.EvalExamples || *sampled.EvalAUC == *plain.EvalAUC {
		t.Errorf("the filter did not change the evaluation: %d rows AUC %v against %d rows AUC %v",
			sampled.EvalExamples, *sampled.EvalAUC, plain.EvalExamples, *plain.EvalAUC)
	}
	// Every label bounded to 0: the model sees only negatives and learns to predict them.
	zero := run(t, "labels: [{label_upper_bound: {bounds: [0]}}]", false)
	t.Logf("train log loss: plain %.4f, labels bounded to 0 %.4f", plain.TrainLogLoss, zero.TrainLogLoss)
	if zero.Examples != plain.Examples || zero.TrainLogLoss > plain.TrainLogLoss/3 {
		t.Errorf("label_upper_bound 0: %d examples, train log loss %.4f (plain %.4f): the model did not see the new labels",
			zero.Examples, zero.TrainLogLoss, plain.TrainLogLoss)
	}
}

// TestOpsErrors: an unknown op, an unknown field or a bad value fails at config time and
// names the section, the op and the field.
func TestOpsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown op", "filters: [{drop_everything: {}}]", []string{"filters[0]", `unknown op "drop_everything"`, "negative_sample"}},
		{"label op under filters", "filters: [{add_label: {}}]", []string{"filters[0]", `"add_label"`}},
		{"unknown field", "filters: [{negative_sample: {droprate: 0.5, thresh: 1}}]", []string{"filters[0].negative_sample", `unknown field "thresh"`, "drop_rate"}},
		{"nested unknown field", "labels: [{add_label: {tasks: [{pos_actions: [1], bogus: 2}]}}]", []string{"labels[0].add_label.tasks[0]", `unknown field "bogus"`}},
		{"bad value", "filters: [{negative_sample: {drop_rate: 2}}]", []string{"filters[0] negative_sample", "drop"}},
		{"two ops in one item", "labels: [{label_upper_bound: {bounds: [1]}, add_action: {}}]", []string{"labels[0]", "exactly one op"}},
		{"not a list", "filters: {negative_sample: {}}", []string{"filters", "list"}},
		{"wrong type", "filters: [{filter_by_label: {thresholds: yes}}]", []string{"filters[0].filter_by_label"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte("train_input: x\nfeature_configs: y\n"+tc.yaml), true)
			if err == nil {
				err = c.Normalize()
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v, want ErrConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// A valid section gives the ops in order, filters first.
	c, err := ParseConfig([]byte("train_input: x\nfeature_configs: y\nlabels: [{label_upper_bound: {bounds: [1]}}]\n"+
		"filters: [{filter_by_label: {thresholds: [0.5], filter_equal: true}}, {negative_sample: {drop_rate: 0.5}}]\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range c.Ops() {
		names = append(names, op.Name())
	}
	if got := strings.Join(names, ","); got != "filter_by_label,negative_sample,label_upper_bound" {
		t.Fatalf("ops %s", got)
	}
	if o := c.Ops()[0].Filter.ByLabel; !o.FilterEqual || len(o.Thresholds) != 1 || o.Thresholds[0] != 0.5 {
		t.Fatalf("filter_by_label options %+v", o)
	}
}
