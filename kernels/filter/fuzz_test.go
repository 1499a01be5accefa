package filter

import (
	"errors"
	"testing"
)

// Each config-string parser must never panic, must wrap ErrConfig on failure, and must
// only return values its op's constructor accepts.

func checkParseErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrConfig) {
		t.Fatalf("error does not wrap ErrConfig: %v", err)
	}
}

func FuzzParseAddLabel(f *testing.F) {
	for _, s := range []string{"1,2:3:1.0;4::0.5", "", ";;", "1:2:0.5:9", "x:1:1", "1::1e-9", " 1 : : 1 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tasks, err := ParseAddLabelConfig(s)
		checkParseErr(t, err)
		if err == nil {
			if _, err := NewAddLabel(AddLabelOptions{Tasks: tasks, NewSampleRate: 1}); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}

func FuzzParseScatterLabel(f *testing.F) {
	for _, s := range []string{"100:3,200:1,300:4", "", "1:65535", "-5:0", "1:1,1:2", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseScatterLabelConfig(s)
		checkParseErr(t, err)
		if err == nil {
			if _, err := NewScatterLabel(o); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}

func FuzzParseReweight(f *testing.F) {
	for _, s := range []string{"1:2:1,2:3:0", "", "1:65536:1", "1:2", "-1:0:-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := ParseReweightConfig(s)
		checkParseErr(t, err)
		if err == nil {
			if _, err := NewInstanceReweight(ReweightOptions{Rules: rules}); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}

func FuzzParseActionPriority(f *testing.F) {
	for _, s := range []string{"1,2,3", "", "1,1", " -4 ,, 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseActionPriority(s)
		checkParseErr(t, err)
		if err == nil {
			if _, err := NewInstanceReweight(ReweightOptions{ActionPriority: p}); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}

func FuzzParsePerActionDropRate(f *testing.F) {
	for _, s := range []string{"1:0.5,2:1", "", "1:2", "1:0.1,1:0.2", "1:-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParsePerActionDropRate(s)
		checkParseErr(t, err)
		if err == nil {
			if _, err := NewNegativeSample(NegativeSampleOptions{ActionPriority: []int32{1}, PerActionDropRate: r}); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}

func FuzzParseStrategyConf(f *testing.F) {
	for _, s := range []string{"1:0.5,2:1:3.5", "", "1:0.5:x", "1:1:inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := ParseStrategyConf(s)
		checkParseErr(t, err)
		if err == nil {
			if _, err := NewSpecialStrategy(StrategyOptions{StrategyList: []int32{1}, Rules: rules}); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}

func FuzzParseNormMethods(f *testing.F) {
	for _, s := range []string{"log,scale", "", "sqrt", " repow ,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseNormMethods(s)
		checkParseErr(t, err)
		if err == nil && len(ms) > 0 {
			if _, err := NewLabelNormalization(NormOptions{Methods: ms, Values: make([]float32, len(ms))}); err != nil {
				t.Fatalf("parsed %q but the op refuses it: %v", s, err)
			}
		}
	})
}
