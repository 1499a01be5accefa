package treedump_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/treedump"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

var dumpSeeds = []string{
	"\"root\":\n\"feature\":\n0:\n\"fid\":\n0: \"1\"\n\"name\": \"fc_a\"\n1:\n\"fid\":\n0: \"2\"\n\"name\": \"fc_b\"\n2:\n" +
		"\"fid\":\n0: \"3\"\n1: \"4\"\nlabel\":\n0: 0\n1: 1\n\"line_id\":\n\"actions\":\n0: 1\n",
	"\"feature\":\n0:\n\"fid_list\":\n0:\n\"value\":\n0: \"1\"\n1:\n\"name\": \"x\"\n\"fid\":\n0: \"2\"\n",
	"\"line_id\":\n\"user_id\": \"a\\\"b\"\n\"sample_rate\": \"NaN\"\n\"is_draw\": true\n",
	"\"label_tag\":\n0:\n\"key\": -1\n\"val\": 1e-3\n\"data_source_key\": 4294967295\n",
	"0:", "\"fid\": 1", "\"\":", ":", "\"feature\":\n0:\n\"bytes_value\":\n0: \"AP8=\"\n",
}

// FuzzParseInstance checks that the decoder never panics, that failures are *treedump.Error
// values on an input line, and that whatever decodes and encodes reads back identically.
func FuzzParseInstance(f *testing.F) {
	for _, s := range dumpSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		inst, err := treedump.ParseInstance(strings.NewReader(text), "fuzz.dump")
		if err != nil {
			var de *treedump.Error
			if !errors.As(err, &de) || !errors.Is(err, treedump.ErrSyntax) || de.Line < 1 ||
				de.Line > strings.Count(text, "\n")+1 {
				t.Fatalf("ParseInstance(%q): error %v is not a *treedump.Error on an input line", text, err)
			}
			return
		}
		b, err := treedump.Encode(inst)
		if err != nil {
			if !errors.Is(err, treedump.ErrNotRepresentable) {
				t.Fatalf("Encode(%v): unexpected error %v", inst, err)
			}
			return
		}
		again, err := treedump.ParseInstance(strings.NewReader(string(b)), "again.dump")
		if err != nil || !proto.Equal(inst, again) {
			t.Fatalf("round trip of %q via %q: %v", text, b, err)
		}
	})
}

// FuzzEncode checks the encoder on arbitrary wire-format Instances: it never panics and
// either refuses with ErrNotRepresentable or writes text that reads back identically.
func FuzzEncode(f *testing.F) {
	for _, s := range dumpSeeds[:4] {
		inst, err := treedump.ParseInstance(strings.NewReader(s), "seed")
		if err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(inst)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		inst := &parserpb.Instance{}
		if proto.Unmarshal(wire, inst) != nil {
			return
		}
		b, err := treedump.Encode(inst)
		if err != nil {
			if !errors.Is(err, treedump.ErrNotRepresentable) {
				t.Fatalf("Encode: unexpected error %v", err)
			}
			return
		}
		again, err := treedump.ParseInstance(strings.NewReader(string(b)), "again.dump")
		if err != nil || !proto.Equal(inst, again) {
			t.Fatalf("round trip via %q: %v", b, err)
		}
	})
}
