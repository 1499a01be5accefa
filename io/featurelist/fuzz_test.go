package featurelist

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every failure is a *ParseError naming
// a line of the input, and that every parsed feature can be found again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"feed_name=area; shared=true; feature_id=368235\n\ncolumn_name : area, b\n",
		"feature_name=fc_doc_id_post_praise_1h_smooth; depend=doc_id_post_praise_1h; method=TobInstanceProfilePairList; " +
			"feature_version=2; args=1,7,0,1,4,1000,10000; slot=4775; shared=true; feature_id=369835",
		"cache_column:uid\ncache_name=c; capacity=1_0; timeout=-3\r\n# c\n",
		"feature_name=a;slot=1", "feature_name=f_a-f_b; slot=2; input_optional=true,\"false\"", "=", "a= =b =c",
		"column_nameé", "cache_column", "feature_name=x\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, opts := range [][]Option{nil, {KeyByNormalizedName()}} {
			l, err := Parse(strings.NewReader(text), "fuzz.conf", opts...)
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > len(splitLines(text)) {
					t.Fatalf("Parse(%q): error %v is not a *ParseError on an input line", text, err)
				}
				continue
			}
			for _, feat := range l.Features {
				key := feat.FeatureName
				if len(opts) > 0 {
					key = feat.NormalizedName()
				}
				if got, ok := l.Feature(key); !ok || got != feat {
					t.Fatalf("Parse(%q): feature %q not found under its key %q", text, feat.FeatureName, key)
				}
				if feat.HasSlot {
					if _, ok := l.BySlot(feat.Slot); !ok {
						t.Fatalf("Parse(%q): slot %d of %q not indexed", text, feat.Slot, feat.FeatureName)
					}
				}
				_, _ = l.Lookup(key)
			}
			for _, c := range l.Caches {
				if got, ok := l.Cache(c.Name()); !ok || got != c {
					t.Fatalf("Parse(%q): cache %q not found", text, c.Name())
				}
			}
			_ = l.CleanColumnNames()
		}
	})
}
