package tfcorepb_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/monolith-go/monolith/schemas/tfcorepb"
)

func TestFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		msg   proto.Message
		field protoreflect.Name
		num   protoreflect.FieldNumber
		kind  protoreflect.Kind
	}{
		// tensorflow/core/protobuf/config.proto
		{&tfcorepb.ConfigProto{}, "device_count", 1, protoreflect.MessageKind},                  // ConfigProto field 1 (map)
		{&tfcorepb.ConfigProto{}, "intra_op_parallelism_threads", 2, protoreflect.Int32Kind},    // ConfigProto field 2
		{&tfcorepb.ConfigProto{}, "placement_period", 3, protoreflect.Int32Kind},                // ConfigProto field 3
		{&tfcorepb.ConfigProto{}, "device_filters", 4, protoreflect.StringKind},                 // ConfigProto field 4
		{&tfcorepb.ConfigProto{}, "inter_op_parallelism_threads", 5, protoreflect.Int32Kind},    // ConfigProto field 5
		{&tfcorepb.ConfigProto{}, "gpu_options", 6, protoreflect.MessageKind},                   // ConfigProto field 6
		{&tfcorepb.ConfigProto{}, "allow_soft_placement", 7, protoreflect.BoolKind},             // ConfigProto field 7
		{&tfcorepb.ConfigProto{}, "log_device_placement", 8, protoreflect.BoolKind},             // ConfigProto field 8
		{&tfcorepb.ConfigProto{}, "use_per_session_threads", 9, protoreflect.BoolKind},          // ConfigProto field 9
		{&tfcorepb.ConfigProto{}, "operation_timeout_in_ms", 11, protoreflect.Int64Kind},        // ConfigProto field 11
		{&tfcorepb.ConfigProto{}, "session_inter_op_thread_pool", 12, protoreflect.MessageKind}, // ConfigProto field 12
		{&tfcorepb.ConfigProto{}, "isolate_session_state", 15, protoreflect.BoolKind},           // ConfigProto field 15
		{&tfcorepb.GPUOptions{}, "per_process_gpu_memory_fraction", 1, protoreflect.DoubleKind}, // GPUOptions field 1
		{&tfcorepb.GPUOptions{}, "allow_growth", 4, protoreflect.BoolKind},                      // GPUOptions field 4
		{&tfcorepb.GPUOptions{}, "visible_device_list", 5, protoreflect.StringKind},             // GPUOptions field 5
		{&tfcorepb.ThreadPoolOptionProto{}, "num_threads", 1, protoreflect.Int32Kind},           // field 1
		{&tfcorepb.ThreadPoolOptionProto{}, "global_name", 2, protoreflect.StringKind},          // field 2
	} {
		md := tc.msg.ProtoReflect().Descriptor()
		fd := md.Fields().ByName(tc.field)
		if fd == nil {
			t.Errorf("%s.%s missing", md.FullName(), tc.field)
			continue
		}
		if fd.Number() != tc.num || fd.Kind() != tc.kind {
			t.Errorf("%s.%s = number %d kind %v, want %d %v", md.FullName(), tc.field, fd.Number(), fd.Kind(), tc.num, tc.kind)
		}
	}
	if got := (&tfcorepb.ConfigProto{}).ProtoReflect().Descriptor().FullName(); got != "tensorflow.ConfigProto" {
		t.Errorf("ConfigProto full name %q", got)
	}
}

func TestErrorCodes(t *testing.T) {
	// tensorflow/core/protobuf/error_codes.proto (tsl/protobuf/error_codes.proto): enum
	// tensorflow.error.Code; 0-16 are the gRPC codes.
	want := map[string]int32{
		"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
		"NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
		"FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
		"INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
		"DO_NOT_USE_RESERVED_FOR_FUTURE_EXPANSION_USE_DEFAULT_IN_SWITCH_INSTEAD_": 20,
	}
	if len(tfcorepb.Code_value) != len(want) {
		t.Errorf("Code has %d values, want %d", len(tfcorepb.Code_value), len(want))
	}
	for name, n := range want {
		if got, ok := tfcorepb.Code_value[name]; !ok || got != n {
			t.Errorf("Code %s = %d, want %d", name, got, n)
		}
	}
	if got := tfcorepb.Code_OK.Descriptor().FullName(); got != "tensorflow.error.Code" {
		t.Errorf("Code full name %q", got)
	}
}

func TestDynamicRoundTrip(t *testing.T) {
	msg := &tfcorepb.ConfigProto{
		DeviceCount:               map[string]int32{"GPU": 0, "CPU": 4},
		IntraOpParallelismThreads: 16, InterOpParallelismThreads: 8, AllowSoftPlacement: true,
		GpuOptions:               &tfcorepb.GPUOptions{AllowGrowth: true, PerProcessGpuMemoryFraction: 0.5},
		SessionInterOpThreadPool: []*tfcorepb.ThreadPoolOptionProto{{NumThreads: 2, GlobalName: "low"}},
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicpb.NewMessage(msg.ProtoReflect().Descriptor())
	if err := proto.Unmarshal(b, dyn); err != nil {
		t.Fatal(err)
	}
	if len(dyn.GetUnknown()) != 0 || !proto.Equal(msg, dyn) {
		t.Errorf("dynamic message differs: %v vs %v", dyn, msg)
	}
	b2, err := proto.Marshal(dyn)
	if err != nil {
		t.Fatal(err)
	}
	var back tfcorepb.ConfigProto
	if err := proto.Unmarshal(b2, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(msg, &back) {
		t.Errorf("round trip changed it: %v vs %v", &back, msg)
	}
}

// TestOmittedFieldsSurvive checks the claim in config.proto: graph_options (10) and
// GPUOptions.experimental (9), left out of our schema, pass through unchanged.
func TestOmittedFieldsSurvive(t *testing.T) {
	var gpu []byte
	gpu = protowire.AppendTag(gpu, 4, protowire.VarintType) // allow_growth
	gpu = protowire.AppendVarint(gpu, 1)
	gpu = protowire.AppendTag(gpu, 9, protowire.BytesType) // experimental (omitted)
	gpu = protowire.AppendBytes(gpu, []byte{0x0a, 0x04, 0, 0, 0x80, 0x3f})
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 16)
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendBytes(b, gpu)
	b = protowire.AppendTag(b, 10, protowire.BytesType) // graph_options (omitted)
	b = protowire.AppendBytes(b, []byte{0x28, 0x01})
	var m tfcorepb.ConfigProto
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.GetIntraOpParallelismThreads() != 16 || !m.GetGpuOptions().GetAllowGrowth() {
		t.Errorf("known fields lost: %v", &m)
	}
	got, err := proto.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Errorf("re-encoded %x, want %x", got, b)
	}
}
