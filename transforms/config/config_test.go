package config_test

import (
	"errors"
	"testing"

	"github.com/monolith-go/monolith/schemas/batch/batchtest"
	"github.com/monolith-go/monolith/transforms/config"
)

func TestLoad(t *testing.T) {
	k, err := config.Load(batchtest.ConfigPath(t), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if k.PS != 1 || k.Version != 5 {
		t.Fatalf("defaults: ps %d version %d", k.PS, k.Version)
	}
	cfg, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Features) != 16 || len(cfg.Tables) != 4 {
		t.Fatalf("%d features, %d tables", len(cfg.Features), len(cfg.Tables))
	}
	for _, bad := range []config.Kernels{
		{FeatureConfigs: k.FeatureConfigs, Version: 6},
		{FeatureConfigs: k.FeatureConfigs, PS: -1},
		{FeatureConfigs: []byte{0xff, 0xff}},
	} {
		if _, err := bad.Build(); !errors.Is(err, config.ErrConfig) {
			t.Errorf("%+v: Build() = %v, want ErrConfig", bad.Version, err)
		}
	}
	if _, err := config.Load("testdata/missing.pbtxt", 1, 5); !errors.Is(err, config.ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}
