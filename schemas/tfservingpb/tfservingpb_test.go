package tfservingpb_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/monolith-go/monolith/schemas/tfcorepb"
	"github.com/monolith-go/monolith/schemas/tfservingpb"
)

// Expected values come from TF Serving's own .proto files; each case names the file and
// the field number it checks.

func TestFullMethodNames(t *testing.T) {
	for _, tc := range []struct {
		svc      protoreflect.ServiceDescriptor
		method   string
		constant string
		want     string
	}{
		// tensorflow_serving/apis/model_service.proto: service ModelService.
		{tfservingpb.File_tensorflow_serving_apis_model_service_proto.Services().ByName("ModelService"),
			"GetModelStatus", tfservingpb.ModelService_GetModelStatus_FullMethodName,
			"/tensorflow.serving.ModelService/GetModelStatus"},
		{tfservingpb.File_tensorflow_serving_apis_model_service_proto.Services().ByName("ModelService"),
			"HandleReloadConfigRequest", tfservingpb.ModelService_HandleReloadConfigRequest_FullMethodName,
			"/tensorflow.serving.ModelService/HandleReloadConfigRequest"},
		// tensorflow_serving/apis/prediction_service.proto: service PredictionService.
		{tfservingpb.File_tensorflow_serving_apis_prediction_service_proto.Services().ByName("PredictionService"),
			"GetModelMetadata", tfservingpb.PredictionService_GetModelMetadata_FullMethodName,
			"/tensorflow.serving.PredictionService/GetModelMetadata"},
	} {
		if tc.constant != tc.want {
			t.Errorf("%s constant = %q, want %q", tc.method, tc.constant, tc.want)
		}
		m := tc.svc.Methods().ByName(protoreflect.Name(tc.method))
		if m == nil {
			t.Errorf("%s missing from %s", tc.method, tc.svc.FullName())
			continue
		}
		if got := "/" + string(tc.svc.FullName()) + "/" + string(m.Name()); got != tc.want {
			t.Errorf("descriptor path %q, want %q", got, tc.want)
		}
	}
	if got := tfservingpb.ModelService_ServiceDesc.ServiceName; got != "tensorflow.serving.ModelService" {
		t.Errorf("ModelService ServiceName = %q", got)
	}
	if got := tfservingpb.PredictionService_ServiceDesc.ServiceName; got != "tensorflow.serving.PredictionService" {
		t.Errorf("PredictionService ServiceName = %q", got)
	}
}

type fieldCase struct {
	msg   proto.Message
	field protoreflect.Name
	num   protoreflect.FieldNumber
	kind  protoreflect.Kind
	oneof protoreflect.Name // containing oneof, if any
}

func checkFields(t *testing.T, cases []fieldCase) {
	t.Helper()
	for _, tc := range cases {
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
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			oneof = o.Name()
		}
		if oneof != tc.oneof {
			t.Errorf("%s.%s in oneof %q, want %q", md.FullName(), tc.field, oneof, tc.oneof)
		}
	}
}

func TestFieldNumbers(t *testing.T) {
	const (
		str  = protoreflect.StringKind
		msg  = protoreflect.MessageKind
		enum = protoreflect.EnumKind
		i32  = protoreflect.Int32Kind
		i64  = protoreflect.Int64Kind
		bl   = protoreflect.BoolKind
	)
	type (
		policy   = tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy
		latest   = tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest
		specific = tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific
	)
	checkFields(t, []fieldCase{
		// tensorflow_serving/apis/model.proto
		{&tfservingpb.ModelSpec{}, "name", 1, str, ""},                        // ModelSpec field 1
		{&tfservingpb.ModelSpec{}, "version", 2, msg, "version_choice"},       // ModelSpec field 2 (Int64Value)
		{&tfservingpb.ModelSpec{}, "version_label", 4, str, "version_choice"}, // ModelSpec field 4
		{&tfservingpb.ModelSpec{}, "signature_name", 3, str, ""},              // ModelSpec field 3
		// tensorflow_serving/apis/status.proto
		{&tfservingpb.StatusProto{}, "error_code", 1, enum, ""},   // StatusProto field 1
		{&tfservingpb.StatusProto{}, "error_message", 2, str, ""}, // StatusProto field 2
		// tensorflow_serving/apis/get_model_status.proto
		{&tfservingpb.GetModelStatusRequest{}, "model_spec", 1, msg, ""},            // field 1
		{&tfservingpb.ModelVersionStatus{}, "version", 1, i64, ""},                  // field 1
		{&tfservingpb.ModelVersionStatus{}, "state", 2, enum, ""},                   // field 2
		{&tfservingpb.ModelVersionStatus{}, "status", 3, msg, ""},                   // field 3
		{&tfservingpb.GetModelStatusResponse{}, "model_version_status", 1, msg, ""}, // field 1
		// tensorflow_serving/apis/model_management.proto
		{&tfservingpb.ReloadConfigRequest{}, "config", 1, msg, ""},                // field 1
		{&tfservingpb.ReloadConfigRequest{}, "metric_names", 2, str, ""},          // field 2
		{&tfservingpb.ReloadConfigResponse{}, "status", 1, msg, ""},               // field 1
		{&tfservingpb.ReloadConfigResponse{}, "metric", 2, msg, ""},               // field 2
		{&tfservingpb.Metric{}, "name", 1, str, ""},                               // field 1
		{&tfservingpb.Metric{}, "int64_value_increase", 2, i64, "value_increase"}, // field 2
		// tensorflow_serving/apis/get_model_metadata.proto
		{&tfservingpb.GetModelMetadataRequest{}, "model_spec", 1, msg, ""},     // field 1
		{&tfservingpb.GetModelMetadataRequest{}, "metadata_field", 2, str, ""}, // field 2
		{&tfservingpb.GetModelMetadataResponse{}, "model_spec", 1, msg, ""},    // field 1
		{&tfservingpb.GetModelMetadataResponse{}, "metadata", 2, msg, ""},      // field 2 (map<string, Any>)
		// tensorflow_serving/config/model_server_config.proto
		{&tfservingpb.ModelConfig{}, "name", 1, str, ""},                            // ModelConfig field 1
		{&tfservingpb.ModelConfig{}, "base_path", 2, str, ""},                       // ModelConfig field 2
		{&tfservingpb.ModelConfig{}, "model_type", 3, enum, ""},                     // ModelConfig field 3
		{&tfservingpb.ModelConfig{}, "model_platform", 4, str, ""},                  // ModelConfig field 4
		{&tfservingpb.ModelConfig{}, "logging_config", 6, msg, ""},                  // ModelConfig field 6
		{&tfservingpb.ModelConfig{}, "model_version_policy", 7, msg, ""},            // ModelConfig field 7
		{&tfservingpb.ModelConfig{}, "version_labels", 8, msg, ""},                  // ModelConfig field 8 (map<string, int64>)
		{&tfservingpb.ModelConfigList{}, "config", 1, msg, ""},                      // ModelConfigList field 1
		{&tfservingpb.ModelServerConfig{}, "model_config_list", 1, msg, "config"},   // field 1
		{&tfservingpb.ModelServerConfig{}, "custom_model_config", 2, msg, "config"}, // field 2
		// tensorflow_serving/config/file_system_storage_path_source.proto
		{&policy{}, "latest", 100, msg, "policy_choice"},                                                // ServableVersionPolicy field 100
		{&policy{}, "all", 101, msg, "policy_choice"},                                                   // ServableVersionPolicy field 101
		{&policy{}, "specific", 102, msg, "policy_choice"},                                              // ServableVersionPolicy field 102
		{&latest{}, "num_versions", 1, protoreflect.Uint32Kind, ""},                                     // Latest field 1
		{&specific{}, "versions", 1, i64, ""},                                                           // Specific field 1
		{&tfservingpb.FileSystemStoragePathSourceConfig{}, "servables", 5, msg, ""},                     // field 5
		{&tfservingpb.FileSystemStoragePathSourceConfig{}, "file_system_poll_wait_seconds", 3, i64, ""}, // field 3
		// tensorflow_serving/config/logging_config.proto and log_collector_config.proto
		{&tfservingpb.LoggingConfig{}, "log_collector_config", 1, msg, ""},               // field 1
		{&tfservingpb.LoggingConfig{}, "sampling_config", 2, msg, ""},                    // field 2
		{&tfservingpb.SamplingConfig{}, "sampling_rate", 1, protoreflect.DoubleKind, ""}, // field 1
		{&tfservingpb.SamplingConfig{}, "attributes", 2, i32, ""},                        // field 2
		{&tfservingpb.LogCollectorConfig{}, "filename_prefix", 2, str, ""},               // field 2
		// tensorflow_serving/config/platform_config.proto
		{&tfservingpb.PlatformConfig{}, "source_adapter_config", 1, msg, ""}, // field 1
		{&tfservingpb.PlatformConfigMap{}, "platform_configs", 1, msg, ""},   // field 1
		// tensorflow_serving/servables/tensorflow/saved_model_bundle_source_adapter.proto
		{&tfservingpb.SavedModelBundleSourceAdapterConfig{}, "legacy_config", 1000, msg, ""}, // field 1000
		// tensorflow_serving/servables/tensorflow/session_bundle_config.proto
		{&tfservingpb.SessionBundleConfig{}, "session_config", 2, msg, ""},       // field 2
		{&tfservingpb.SessionBundleConfig{}, "batching_parameters", 3, msg, ""},  // field 3
		{&tfservingpb.SessionBundleConfig{}, "enable_model_warmup", 779, bl, ""}, // field 779
		{&tfservingpb.BatchingParameters{}, "max_batch_size", 1, msg, ""},        // field 1
		{&tfservingpb.BatchingParameters{}, "batch_timeout_micros", 2, msg, ""},  // field 2
		{&tfservingpb.BatchingParameters{}, "max_enqueued_batches", 3, msg, ""},  // field 3
		{&tfservingpb.BatchingParameters{}, "num_batch_threads", 4, msg, ""},     // field 4
		// Monolith's third_party/org_tensorflow_serving/support_diff_dim_size_inputs.patch: field 10.
		{&tfservingpb.BatchingParameters{}, "support_diff_dim_size_inputs", 10, bl, ""},
	})

	// model_server_config.proto: ModelConfig reserves 5 and 9.
	rr := (&tfservingpb.ModelConfig{}).ProtoReflect().Descriptor().ReservedRanges()
	for _, n := range []protoreflect.FieldNumber{5, 9} {
		if !rr.Has(n) {
			t.Errorf("ModelConfig does not reserve %d", n)
		}
	}
	// status.proto and get_model_status.proto: explicit snake_case JSON names.
	for _, tc := range []struct {
		msg  proto.Message
		name protoreflect.Name
	}{
		{&tfservingpb.StatusProto{}, "error_code"},
		{&tfservingpb.StatusProto{}, "error_message"},
		{&tfservingpb.GetModelStatusResponse{}, "model_version_status"},
	} {
		fd := tc.msg.ProtoReflect().Descriptor().Fields().ByName(tc.name)
		if fd.JSONName() != string(tc.name) {
			t.Errorf("%s json_name %q, want %q", fd.FullName(), fd.JSONName(), tc.name)
		}
	}
	// status.proto field 1 is a tensorflow.error.Code.
	if got := (&tfservingpb.StatusProto{}).ProtoReflect().Descriptor().Fields().ByNumber(1).Enum().FullName(); got != "tensorflow.error.Code" {
		t.Errorf("StatusProto.error_code enum %q", got)
	}
	// session_bundle_config.proto field 2 is a tensorflow.ConfigProto.
	if got := (&tfservingpb.SessionBundleConfig{}).ProtoReflect().Descriptor().Fields().ByNumber(2).Message().FullName(); got != "tensorflow.ConfigProto" {
		t.Errorf("SessionBundleConfig.session_config type %q", got)
	}
}

func TestEnumValues(t *testing.T) {
	// tensorflow_serving/apis/get_model_status.proto: ModelVersionStatus.State.
	for name, want := range map[string]int32{"UNKNOWN": 0, "START": 10, "LOADING": 20, "AVAILABLE": 30, "UNLOADING": 40, "END": 50} {
		if got, ok := tfservingpb.ModelVersionStatus_State_value[name]; !ok || got != want {
			t.Errorf("ModelVersionStatus.State %s = %d, want %d", name, got, want)
		}
	}
	if n := len(tfservingpb.ModelVersionStatus_State_name); n != 6 {
		t.Errorf("ModelVersionStatus.State has %d values, want 6", n)
	}
	// tensorflow_serving/config/model_server_config.proto: ModelType.
	for name, want := range map[string]int32{"MODEL_TYPE_UNSPECIFIED": 0, "TENSORFLOW": 1, "OTHER": 2} {
		if got := tfservingpb.ModelType_value[name]; got != want {
			t.Errorf("ModelType %s = %d, want %d", name, got, want)
		}
	}
}

func sampleConfig() *tfservingpb.ModelServerConfig {
	return &tfservingpb.ModelServerConfig{Config: &tfservingpb.ModelServerConfig_ModelConfigList{
		ModelConfigList: &tfservingpb.ModelConfigList{Config: []*tfservingpb.ModelConfig{
			{
				Name: "test_ffm_model:entry", BasePath: "/x/exported_models/entry", ModelPlatform: "tensorflow",
				ModelVersionPolicy: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy{
					PolicyChoice: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest_{
						Latest: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest{NumVersions: 1},
					},
				},
				VersionLabels: map[string]int64{"stable": 1234},
			},
			{
				Name: "ps_0", BasePath: "/x/exported_models/ps_0", ModelPlatform: "tensorflow",
				ModelVersionPolicy: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy{
					PolicyChoice: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific_{
						Specific: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific{Versions: []int64{1, 1700000000}},
					},
				},
			},
			{
				Name: "dense_0", BasePath: "/x/exported_models/dense_0",
				ModelVersionPolicy: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy{
					PolicyChoice: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_All_{
						All: &tfservingpb.FileSystemStoragePathSourceConfig_ServableVersionPolicy_All{},
					},
				},
			},
		}},
	}}
}

func platformConfig(t *testing.T) *tfservingpb.PlatformConfigMap {
	t.Helper()
	adapter, err := anypb.New(&tfservingpb.SavedModelBundleSourceAdapterConfig{LegacyConfig: &tfservingpb.SessionBundleConfig{
		SessionConfig: &tfcorepb.ConfigProto{
			IntraOpParallelismThreads: 16, InterOpParallelismThreads: 16, AllowSoftPlacement: true,
			GpuOptions: &tfcorepb.GPUOptions{AllowGrowth: true},
		},
		BatchingParameters: &tfservingpb.BatchingParameters{
			MaxBatchSize: wrapperspb.Int64(1024), BatchTimeoutMicros: wrapperspb.Int64(800),
			MaxEnqueuedBatches: wrapperspb.Int64(100000), NumBatchThreads: wrapperspb.Int64(8),
			SupportDiffDimSizeInputs: true,
		},
		EnableModelWarmup: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &tfservingpb.PlatformConfigMap{PlatformConfigs: map[string]*tfservingpb.PlatformConfig{
		"tensorflow": {SourceAdapterConfig: adapter},
	}}
}

// TestDynamicRoundTrip decodes the generated types' bytes with only the descriptor and
// checks that nothing is lost either way.
func TestDynamicRoundTrip(t *testing.T) {
	for _, msg := range []proto.Message{
		&tfservingpb.ReloadConfigRequest{Config: sampleConfig(), MetricNames: []string{"m"}},
		&tfservingpb.GetModelStatusResponse{ModelVersionStatus: []*tfservingpb.ModelVersionStatus{
			{Version: 1, State: tfservingpb.ModelVersionStatus_END},
			{Version: 2, State: tfservingpb.ModelVersionStatus_AVAILABLE, Status: &tfservingpb.StatusProto{}},
			{Version: -1, State: tfservingpb.ModelVersionStatus_UNKNOWN,
				Status: &tfservingpb.StatusProto{ErrorCode: tfcorepb.Code_NOT_FOUND, ErrorMessage: "m is not found"}},
		}},
		&tfservingpb.GetModelStatusRequest{ModelSpec: &tfservingpb.ModelSpec{
			Name: "ps_0", VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(7)}, SignatureName: "serving_default"}},
		&tfservingpb.GetModelMetadataResponse{
			ModelSpec: &tfservingpb.ModelSpec{Name: "entry", VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "stable"}},
			Metadata:  map[string]*anypb.Any{"base_path": {Value: []byte("'/x/entry'")}},
		},
		&tfservingpb.ReloadConfigResponse{
			Status: &tfservingpb.StatusProto{ErrorCode: tfcorepb.Code_INVALID_ARGUMENT, ErrorMessage: "bad"},
			Metric: []*tfservingpb.Metric{{Name: "loads", ValueIncrease: &tfservingpb.Metric_Int64ValueIncrease{Int64ValueIncrease: 3}}},
		},
		platformConfig(t),
	} {
		b, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		dyn := dynamicpb.NewMessage(msg.ProtoReflect().Descriptor())
		if err := proto.Unmarshal(b, dyn); err != nil {
			t.Fatalf("%T: dynamic unmarshal: %v", msg, err)
		}
		if len(dyn.GetUnknown()) != 0 {
			t.Errorf("%T: dynamic message has unknown bytes %x", msg, dyn.GetUnknown())
		}
		if !proto.Equal(msg, dyn) {
			t.Errorf("%T: dynamic message differs:\n%v\nvs\n%v", msg, dyn, msg)
		}
		b2, err := proto.Marshal(dyn)
		if err != nil {
			t.Fatal(err)
		}
		back := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b2, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(msg, back) {
			t.Errorf("%T: round trip through dynamicpb changed it:\n%v\nvs\n%v", msg, back, msg)
		}
	}
}

// TestModelConfigText parses the text forms of spec/serving-and-control.md §1.8.
func TestModelConfigText(t *testing.T) {
	const full = `model_config_list {
  config {
    name: "test_ffm_model:entry"
    base_path: "/x/exported_models/entry"
    model_platform: "tensorflow"
    model_version_policy {
      latest {
        num_versions: 1
      }
    }
  }
}
`
	var cfg tfservingpb.ModelServerConfig
	if err := prototext.Unmarshal([]byte(full), &cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.GetModelConfigList().GetConfig()
	if len(c) != 1 || c[0].GetName() != "test_ffm_model:entry" || c[0].GetBasePath() != "/x/exported_models/entry" ||
		c[0].GetModelPlatform() != "tensorflow" || c[0].GetModelVersionPolicy().GetLatest().GetNumVersions() != 1 {
		t.Errorf("parsed %v", &cfg)
	}
	for _, empty := range []string{"model_config_list {}", "model_config_list {\n}\n"} {
		var cfg tfservingpb.ModelServerConfig
		if err := prototext.Unmarshal([]byte(empty), &cfg); err != nil {
			t.Fatalf("%q: %v", empty, err)
		}
		if cfg.GetModelConfigList() == nil || len(cfg.GetModelConfigList().GetConfig()) != 0 {
			t.Errorf("%q parsed as %v", empty, &cfg)
		}
	}
	// Text round trip of every policy kind.
	in := sampleConfig()
	txt, err := prototext.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out tfservingpb.ModelServerConfig
	if err := prototext.Unmarshal(txt, &out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, &out) {
		t.Errorf("text round trip:\n%s", txt)
	}
}

// TestPlatformConfigText checks that the platform config's Any is written in the expanded
// form TF Serving reads, and reads back.
func TestPlatformConfigText(t *testing.T) {
	in := platformConfig(t)
	txt, err := prototext.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(txt), "[type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig]") {
		t.Errorf("Any not expanded:\n%s", txt)
	}
	var out tfservingpb.PlatformConfigMap
	if err := prototext.Unmarshal(txt, &out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, &out) {
		t.Errorf("text round trip:\n%s", txt)
	}
}

// TestOmittedFieldsSurvive checks the claim in session_bundle_config.proto: fields left out
// of our schema pass through a decode and re-encode unchanged.
func TestOmittedFieldsSurvive(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType) // session_target
	b = protowire.AppendString(b, "local")
	b = protowire.AppendTag(b, 7, protowire.BytesType) // in_graph_batching_parameters (omitted)
	b = protowire.AppendBytes(b, []byte{0x08, 0x01})
	b = protowire.AppendTag(b, 778, protowire.BytesType) // experimental_fixed_input_tensors (omitted)
	b = protowire.AppendBytes(b, []byte{0x0a, 0x01, 'x'})
	var m tfservingpb.SessionBundleConfig
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.GetSessionTarget() != "local" {
		t.Errorf("session_target %q", m.GetSessionTarget())
	}
	got, err := proto.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Errorf("re-encoded %x, want %x", got, b)
	}
}
