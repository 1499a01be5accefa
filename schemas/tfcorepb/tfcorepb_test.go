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

// TestEventAndSummaryFieldNumbers pins the numbers of event.proto, summary.proto and the
// numeric lists of tensor.proto to TensorFlow's.
func TestEventAndSummaryFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		msg   proto.Message
		field protoreflect.Name
		num   protoreflect.FieldNumber
		kind  protoreflect.Kind
		oneof protoreflect.Name // the containing oneof, if any
	}{
		// tensorflow/core/util/event.proto
		{&tfcorepb.Event{}, "wall_time", 1, protoreflect.DoubleKind, ""},
		{&tfcorepb.Event{}, "step", 2, protoreflect.Int64Kind, ""},
		{&tfcorepb.Event{}, "file_version", 3, protoreflect.StringKind, "what"},
		{&tfcorepb.Event{}, "graph_def", 4, protoreflect.BytesKind, "what"},
		{&tfcorepb.Event{}, "summary", 5, protoreflect.MessageKind, "what"},
		{&tfcorepb.Event{}, "log_message", 6, protoreflect.MessageKind, "what"},
		{&tfcorepb.Event{}, "session_log", 7, protoreflect.MessageKind, "what"},
		{&tfcorepb.Event{}, "tagged_run_metadata", 8, protoreflect.MessageKind, "what"},
		{&tfcorepb.Event{}, "meta_graph_def", 9, protoreflect.BytesKind, "what"},
		{&tfcorepb.Event{}, "source_metadata", 10, protoreflect.MessageKind, ""},
		{&tfcorepb.SourceMetadata{}, "writer", 1, protoreflect.StringKind, ""},
		{&tfcorepb.LogMessage{}, "level", 1, protoreflect.EnumKind, ""},
		{&tfcorepb.LogMessage{}, "message", 2, protoreflect.StringKind, ""},
		{&tfcorepb.SessionLog{}, "status", 1, protoreflect.EnumKind, ""},
		{&tfcorepb.SessionLog{}, "checkpoint_path", 2, protoreflect.StringKind, ""},
		{&tfcorepb.SessionLog{}, "msg", 3, protoreflect.StringKind, ""},
		{&tfcorepb.TaggedRunMetadata{}, "tag", 1, protoreflect.StringKind, ""},
		{&tfcorepb.TaggedRunMetadata{}, "run_metadata", 2, protoreflect.BytesKind, ""},
		// tensorflow/core/framework/summary.proto
		{&tfcorepb.SummaryDescription{}, "type_hint", 1, protoreflect.StringKind, ""},
		{&tfcorepb.HistogramProto{}, "min", 1, protoreflect.DoubleKind, ""},
		{&tfcorepb.HistogramProto{}, "max", 2, protoreflect.DoubleKind, ""},
		{&tfcorepb.HistogramProto{}, "num", 3, protoreflect.DoubleKind, ""},
		{&tfcorepb.HistogramProto{}, "sum", 4, protoreflect.DoubleKind, ""},
		{&tfcorepb.HistogramProto{}, "sum_squares", 5, protoreflect.DoubleKind, ""},
		{&tfcorepb.HistogramProto{}, "bucket_limit", 6, protoreflect.DoubleKind, ""},
		{&tfcorepb.HistogramProto{}, "bucket", 7, protoreflect.DoubleKind, ""},
		{&tfcorepb.SummaryMetadata{}, "plugin_data", 1, protoreflect.MessageKind, ""},
		{&tfcorepb.SummaryMetadata{}, "display_name", 2, protoreflect.StringKind, ""},
		{&tfcorepb.SummaryMetadata{}, "summary_description", 3, protoreflect.StringKind, ""},
		{&tfcorepb.SummaryMetadata{}, "data_class", 4, protoreflect.EnumKind, ""},
		{&tfcorepb.SummaryMetadata_PluginData{}, "plugin_name", 1, protoreflect.StringKind, ""},
		{&tfcorepb.SummaryMetadata_PluginData{}, "content", 2, protoreflect.BytesKind, ""},
		{&tfcorepb.Summary{}, "value", 1, protoreflect.MessageKind, ""},
		{&tfcorepb.Summary_Value{}, "tag", 1, protoreflect.StringKind, ""},
		{&tfcorepb.Summary_Value{}, "simple_value", 2, protoreflect.FloatKind, "value"},
		{&tfcorepb.Summary_Value{}, "obsolete_old_style_histogram", 3, protoreflect.BytesKind, "value"},
		{&tfcorepb.Summary_Value{}, "image", 4, protoreflect.MessageKind, "value"},
		{&tfcorepb.Summary_Value{}, "histo", 5, protoreflect.MessageKind, "value"},
		{&tfcorepb.Summary_Value{}, "audio", 6, protoreflect.MessageKind, "value"},
		{&tfcorepb.Summary_Value{}, "node_name", 7, protoreflect.StringKind, ""},
		{&tfcorepb.Summary_Value{}, "tensor", 8, protoreflect.MessageKind, "value"},
		{&tfcorepb.Summary_Value{}, "metadata", 9, protoreflect.MessageKind, ""},
		{&tfcorepb.Summary_Image{}, "height", 1, protoreflect.Int32Kind, ""},
		{&tfcorepb.Summary_Image{}, "width", 2, protoreflect.Int32Kind, ""},
		{&tfcorepb.Summary_Image{}, "colorspace", 3, protoreflect.Int32Kind, ""},
		{&tfcorepb.Summary_Image{}, "encoded_image_string", 4, protoreflect.BytesKind, ""},
		{&tfcorepb.Summary_Audio{}, "sample_rate", 1, protoreflect.FloatKind, ""},
		{&tfcorepb.Summary_Audio{}, "num_channels", 2, protoreflect.Int64Kind, ""},
		{&tfcorepb.Summary_Audio{}, "length_frames", 3, protoreflect.Int64Kind, ""},
		{&tfcorepb.Summary_Audio{}, "encoded_audio_string", 4, protoreflect.BytesKind, ""},
		{&tfcorepb.Summary_Audio{}, "content_type", 5, protoreflect.StringKind, ""},
		// tensorflow/core/framework/tensor.proto
		{&tfcorepb.TensorProto{}, "tensor_content", 4, protoreflect.BytesKind, ""},
		{&tfcorepb.TensorProto{}, "float_val", 5, protoreflect.FloatKind, ""},
		{&tfcorepb.TensorProto{}, "double_val", 6, protoreflect.DoubleKind, ""},
		{&tfcorepb.TensorProto{}, "int_val", 7, protoreflect.Int32Kind, ""},
		{&tfcorepb.TensorProto{}, "string_val", 8, protoreflect.BytesKind, ""},
		{&tfcorepb.TensorProto{}, "int64_val", 10, protoreflect.Int64Kind, ""},
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
		var oneof protoreflect.Name
		if o := fd.ContainingOneof(); o != nil {
			oneof = o.Name()
		}
		if oneof != tc.oneof {
			t.Errorf("%s.%s in oneof %q, want %q", md.FullName(), tc.field, oneof, tc.oneof)
		}
		if fd.IsList() && fd.Kind() != protoreflect.BytesKind && fd.Kind() != protoreflect.MessageKind && !fd.IsPacked() {
			t.Errorf("%s.%s is not packed", md.FullName(), tc.field)
		}
	}
	for name, n := range map[string]int32{"DATA_CLASS_UNKNOWN": 0, "DATA_CLASS_SCALAR": 1, "DATA_CLASS_TENSOR": 2, "DATA_CLASS_BLOB_SEQUENCE": 3} {
		if got, ok := tfcorepb.DataClass_value[name]; !ok || got != n {
			t.Errorf("DataClass %s = %d, want %d", name, got, n)
		}
	}
	for name, n := range map[string]int32{"STATUS_UNSPECIFIED": 0, "START": 1, "STOP": 2, "CHECKPOINT": 3} {
		if got, ok := tfcorepb.SessionLog_SessionStatus_value[name]; !ok || got != n {
			t.Errorf("SessionStatus %s = %d, want %d", name, got, n)
		}
	}
	for name, n := range map[string]int32{"UNKNOWN": 0, "DEBUGGING": 10, "INFO": 20, "WARN": 30, "ERROR": 40, "FATAL": 50} {
		if got, ok := tfcorepb.LogMessage_Level_value[name]; !ok || got != n {
			t.Errorf("LogMessage.Level %s = %d, want %d", name, got, n)
		}
	}
	if got := (&tfcorepb.Summary_Value{}).ProtoReflect().Descriptor().FullName(); got != "tensorflow.Summary.Value" {
		t.Errorf("Summary.Value full name %q", got)
	}
}

// TestEventOmittedFieldsSurvive checks the claim in tensor.proto: bool_val (11), left out
// of our TensorProto, passes through an Event unchanged.
func TestEventOmittedFieldsSurvive(t *testing.T) {
	var tensor []byte
	tensor = protowire.AppendTag(tensor, 1, protowire.VarintType) // dtype DT_BOOL
	tensor = protowire.AppendVarint(tensor, 10)
	tensor = protowire.AppendTag(tensor, 11, protowire.BytesType) // bool_val (omitted), packed
	tensor = protowire.AppendBytes(tensor, []byte{1})
	var val []byte
	val = protowire.AppendTag(val, 1, protowire.BytesType)
	val = protowire.AppendString(val, "flag")
	val = protowire.AppendTag(val, 8, protowire.BytesType)
	val = protowire.AppendBytes(val, tensor)
	var sum []byte
	sum = protowire.AppendTag(sum, 1, protowire.BytesType)
	sum = protowire.AppendBytes(sum, val)
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, sum)
	var e tfcorepb.Event
	if err := proto.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.GetStep() != 7 || e.GetSummary().GetValue()[0].GetTensor().GetDtype() != tfcorepb.DataType_DT_BOOL {
		t.Errorf("known fields lost: %v", &e)
	}
	got, err := proto.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Errorf("re-encoded %x, want %x", got, b)
	}
}
