package filter

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestParseAddLabelConfig(t *testing.T) {
	got, err := ParseAddLabelConfig("1,2:3:1.0;4::0.5")
	want := []AddLabelTask{
		{PosActions: []int32{1, 2}, NegActions: []int32{3}, SampleRate: 1},
		{PosActions: []int32{4}, SampleRate: 0.5},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	got, err = ParseAddLabelConfig(" ; 7 , ,8 :9: 0 ;;")
	want = []AddLabelTask{{PosActions: []int32{7, 8}, NegActions: []int32{9}, SampleRate: 0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("blanks and empty parts: got %+v, %v", got, err)
	}
	for _, tc := range []struct{ in, token string }{
		{"1:2", "1:2"},
		{"1:2:0.5:9", "1:2:0.5:9"},
		{"x:2:0.5", "x"},
		{"1:2:1.5", "1.5"},
		{"1:2:NaN", "NaN"},
		{":2:0.5", ":2:0.5"},
		{"1,2:2:0.5", "1,2:2:0.5"},
		{"1:99999999999:0.5", "99999999999"},
		{"", ""},
		{";;", ";;"},
	} {
		_, err := ParseAddLabelConfig(tc.in)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"`+tc.token+`"`) {
			t.Errorf("%q: got %v, want ErrConfig naming %q", tc.in, err, tc.token)
		}
	}
}

func TestParseScatterLabelConfig(t *testing.T) {
	got, err := ParseScatterLabelConfig("100:3,200:1,300:4")
	if err != nil || got.TaskNum != 5 || !maps.Equal(got.Index, map[int64]int{100: 3, 200: 1, 300: 4}) {
		t.Errorf("got %+v, %v", got, err)
	}
	for _, tc := range []struct{ in, token string }{
		{"100", "100"},
		{"a:1", "a:1"},
		{"1:-1", "1:-1"},
		{"1:65536", "1:65536"},
		{"1:1,1:2", "1:2"},
		{",", ","},
	} {
		_, err := ParseScatterLabelConfig(tc.in)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"`+tc.token+`"`) {
			t.Errorf("%q: got %v, want ErrConfig naming %q", tc.in, err, tc.token)
		}
	}
}

func TestParseReweightConfig(t *testing.T) {
	got, err := ParseReweightConfig("1:2:1, -3:0:-1")
	want := []ReweightRule{{Action: 1, Weight: 2, Label: 1}, {Action: -3, Weight: 0, Label: -1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v", got, err)
	}
	if got, err := ParseReweightConfig(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, tc := range []struct{ in, token string }{
		{"1:2", "1:2"},
		{"1:-2:1", "1:-2:1"},
		{"1:2:1.5", "1:2:1.5"},
		{"1:70000:1", "1:70000:1"},
		{"1:1:1,1:2:1", "1:2:1"},
	} {
		_, err := ParseReweightConfig(tc.in)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"`+tc.token+`"`) {
			t.Errorf("%q: got %v, want ErrConfig naming %q", tc.in, err, tc.token)
		}
	}
}

func TestParseActionPriorityAndRates(t *testing.T) {
	p, err := ParseActionPriority("3, 1,2")
	if err != nil || !reflect.DeepEqual(p, []int32{3, 1, 2}) {
		t.Errorf("priority: %v, %v", p, err)
	}
	for _, in := range []string{"1,x", "1,1", "1,2147483648"} {
		if _, err := ParseActionPriority(in); !errors.Is(err, ErrConfig) {
			t.Errorf("priority %q: %v", in, err)
		}
	}
	r, err := ParsePerActionDropRate("1:0.5,2:1")
	if err != nil || !maps.Equal(r, map[int32]float64{1: 0.5, 2: 1}) {
		t.Errorf("rates: %v, %v", r, err)
	}
	for _, in := range []string{"1", "1:2", "1:0.1,1:0.2", "a:0.1"} {
		if _, err := ParsePerActionDropRate(in); !errors.Is(err, ErrConfig) {
			t.Errorf("rates %q: %v", in, err)
		}
	}
}

func TestParseStrategyConf(t *testing.T) {
	got, err := ParseStrategyConf("1:0.5,2:1:3.5")
	want := []StrategyRule{{Strategy: 1, SampleRate: 0.5}, {Strategy: 2, SampleRate: 1, Label: 3.5, HasLabel: true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v", got, err)
	}
	for _, in := range []string{"1", "1:2", "1:0.5:x", "1:0.5:1:1", "1:0.5,1:0.2", "1:0.5:1e99"} {
		if _, err := ParseStrategyConf(in); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestParseNormMethods(t *testing.T) {
	got, err := ParseNormMethods("log, scale,scale2int,pow,repow,scalelog")
	want := []NormMethod{NormLog, NormScale, NormScale2Int, NormPow, NormRepow, NormScaleLog}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, m := range want {
		if back, err := ParseNormMethod(m.String()); err != nil || back != m {
			t.Errorf("%v round trip: %v, %v", m, back, err)
		}
	}
	if _, err := ParseNormMethods("log,sqrt"); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"sqrt"`) {
		t.Errorf("unknown: %v", err)
	}
}
