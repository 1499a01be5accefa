package model_test

import (
	"strings"
	"testing"

	kmodel "github.com/monolith-go/monolith/kernels/model"
	"github.com/monolith-go/monolith/transforms/model"
)

func TestRegistry(t *testing.T) {
	var r model.Registry
	c := func(model.Spec, []kmodel.Input) (model.Net, error) { return nil, nil }
	if err := r.Register("mine", c); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("MINE", c); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("second registration: %v", err)
	}
	if err := r.Register(" ", c); err == nil {
		t.Fatal("empty name registered")
	}
	if _, err := r.New(model.Spec{Name: "theirs"}, nil); err == nil || !strings.Contains(err.Error(), "models.mine") {
		t.Fatalf("unknown model: %v (want the known keys listed)", err)
	}
	// The built-in models are built with their spec's settings.
	in := []kmodel.Input{{Name: "b", Width: 1}, {Name: "v", Width: 8, Fields: []int{4, 4}}}
	n, err := model.New(model.Spec{Name: "DeepFM", Bias: "b", Vec: "v", Hidden: []int{3}}, in)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, p := range n.Params() {
		sizes = append(sizes, p.Size())
	}
	if len(sizes) < 3 || sizes[0] != 1 {
		t.Fatalf("deepfm params %v", n.Params())
	}
	if _, err := model.New(model.Spec{Name: "fm", Bias: "nope", Vec: "v"}, in); err == nil {
		t.Fatal("fm without its bias layout was built")
	}
}
