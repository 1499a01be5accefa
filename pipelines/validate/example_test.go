package validate_test

import (
	"fmt"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/pipelines/validate"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// Static lists every problem of a config, each naming its layout, slice and feature.
func ExampleStatic() {
	fc := &examplepb.FeatureConfigs{}
	err := prototext.Unmarshal([]byte(`
feature_configs { key: "f_user_id" value { table: "user" slice_dims: 1 slice_dims: 8 } }
feature_configs { key: "f_title" value { table: "item" pooling_type: FIRSTN max_sequence_length: 4 slice_dims: 8 } }
out_configs { key: "bias" value { out_type: ADDN
  slice_configs { feature_name: "f_user_id" start: 0 end: 1 }
  slice_configs { feature_name: "f_title" start: 0 end: 1 } } }
out_configs { key: "vec" value { out_type: CONCAT
  slice_configs { feature_name: "f_user_id" start: 1 end: 10 }
  slice_configs { feature_name: "f_nope" start: 0 end: 8 } } }`), fc)
	if err != nil {
		panic(err)
	}
	for _, f := range validate.Static(fc, validate.Options{}) {
		fmt.Printf("%s %s: %s\n", f.Status, f.Check, f.Message)
	}
	// Output:
	// fail addn-firstn: layout "bias": ADDN cannot pool with FIRSTN
	// fail slice-bounds: layout "vec": slice 0 of feature "f_user_id" is [1, 10), outside its embedding [0, 9)
	// fail unknown-feature: layout "vec": slice 1 names unknown feature "f_nope"
}
