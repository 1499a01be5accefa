package pqfile

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// withFooter returns a Parquet file whose footer is meta (Thrift compact bytes).
func withFooter(meta []byte) []byte {
	out := append([]byte("PAR1"), meta...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	return append(out, "PAR1"...)
}

// TestFooterClaims: footers whose sizes claim more than their bytes hold are errors naming
// the offset, before arrow-go allocates for them.
func TestFooterClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta []byte
		want string
	}{
		// version 1; schema: one struct element {name "s", num_children 2^30}.
		{"children", []byte{0x15, 0x02, 0x19, 0x1c, 0x48, 0x01, 's', 0x15, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00, 0x00}, "claims 1073741824 children"},
		// schema: a root with three children but two elements after it.
		{"short", []byte{0x29, 0x3c, 0x48, 0x01, 'r', 0x15, 0x06, 0x00, 0x48, 0x01, 'a', 0x00, 0x48, 0x01, 'b', 0x00, 0x00}, "claims 3 children"},
		{"negative", []byte{0x29, 0x1c, 0x48, 0x01, 'r', 0x15, 0x01, 0x00, 0x00}, "claims -1 children"},
		// field 4 (row groups): a list of 2^31 structs in a few bytes.
		{"list", []byte{0x49, 0xfc, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00}, "container of 2147483648 elements"},
		{"string", []byte{0x68, 0xff, 0xff, 0x03}, "bytes claimed"},
		{"deep", bytes.Repeat([]byte{0x1c}, 100), "nesting deeper"},
		{"truncated", []byte{0x15}, "truncated"},
	} {
		_, err := Open(bytes.NewReader(withFooter(tc.meta)), memory.DefaultAllocator, 16)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "parquet footer at offset 4") {
			t.Errorf("%s: %v, want an error at offset 4 containing %q", tc.name, err, tc.want)
		}
	}
}

// TestFooterValid: the footer of a file pqarrow wrote passes the walk.
func TestFooterValid(t *testing.T) {
	if err := checkFooter(bytes.NewReader(validFile(t, 10))); err != nil {
		t.Fatal(err)
	}
}

func TestCheckSchemaTree(t *testing.T) {
	for _, tc := range []struct {
		children []int32
		ok       bool
	}{
		{[]int32{0}, true},
		{[]int32{2, 0, 1, 0}, true},
		{[]int32{2, 1, 0, 0}, true},
		{[]int32{1, 0, 0}, true}, // a trailing element is ignored
		{[]int32{2, 0}, false},
		{[]int32{2, 2, 0, 0}, false},
		{[]int32{}, false},
		{[]int32{-1, 0}, false},
	} {
		if err := checkSchemaTree(tc.children); (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.children, err)
		}
	}
}
