package agentpb_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/monolith-go/monolith/schemas/agentpb"
)

// Expected values come from Monolith's monolith/agent_service/agent_service.proto
// (spec/serving-and-control.md §1.2).

func TestFullMethodNames(t *testing.T) {
	svc := agentpb.File_monolith_serving_agent_service_agent_service_proto.Services().ByName("AgentService")
	if svc == nil {
		t.Fatal("AgentService not in the file descriptor")
	}
	for _, tc := range []struct {
		method, constant, want string
	}{
		// agent_service.proto: service AgentService in package monolith.serving.agent_service.
		{"GetReplicas", agentpb.AgentService_GetReplicas_FullMethodName, "/monolith.serving.agent_service.AgentService/GetReplicas"},
		{"GetResource", agentpb.AgentService_GetResource_FullMethodName, "/monolith.serving.agent_service.AgentService/GetResource"},
		{"HeartBeat", agentpb.AgentService_HeartBeat_FullMethodName, "/monolith.serving.agent_service.AgentService/HeartBeat"},
	} {
		if tc.constant != tc.want {
			t.Errorf("%s constant = %q, want %q", tc.method, tc.constant, tc.want)
		}
		m := svc.Methods().ByName(protoreflect.Name(tc.method))
		if m == nil {
			t.Errorf("method %s missing from the descriptor", tc.method)
			continue
		}
		if got := "/" + string(svc.FullName()) + "/" + string(m.Name()); got != tc.want {
			t.Errorf("descriptor path %q, want %q", got, tc.want)
		}
	}
	if n := svc.Methods().Len(); n != 3 {
		t.Errorf("AgentService has %d methods, want 3", n)
	}
	if got := agentpb.AgentService_ServiceDesc.ServiceName; got != "monolith.serving.agent_service.AgentService" {
		t.Errorf("ServiceDesc.ServiceName = %q", got)
	}
}

func TestFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		msg   proto.Message
		field protoreflect.Name
		num   protoreflect.FieldNumber
		kind  protoreflect.Kind
	}{
		{&agentpb.AddressList{}, "address", 1, protoreflect.StringKind},               // AddressList field 1
		{&agentpb.GetReplicasRequest{}, "server_type", 1, protoreflect.EnumKind},      // GetReplicasRequest field 1
		{&agentpb.GetReplicasRequest{}, "task", 2, protoreflect.Int32Kind},            // GetReplicasRequest field 2
		{&agentpb.GetReplicasRequest{}, "model_name", 3, protoreflect.StringKind},     // GetReplicasRequest field 3
		{&agentpb.GetReplicasResponse{}, "address_list", 1, protoreflect.MessageKind}, // GetReplicasResponse field 1
		{&agentpb.GetResourceResponse{}, "address", 1, protoreflect.StringKind},       // GetResourceResponse field 1
		{&agentpb.GetResourceResponse{}, "shard_id", 2, protoreflect.Int32Kind},       // GetResourceResponse field 2
		{&agentpb.GetResourceResponse{}, "replica_id", 3, protoreflect.Int32Kind},     // GetResourceResponse field 3
		{&agentpb.GetResourceResponse{}, "memory", 4, protoreflect.Int64Kind},         // GetResourceResponse field 4
		{&agentpb.GetResourceResponse{}, "cpu", 5, protoreflect.FloatKind},            // GetResourceResponse field 5
		{&agentpb.GetResourceResponse{}, "network", 6, protoreflect.FloatKind},        // GetResourceResponse field 6
		{&agentpb.GetResourceResponse{}, "work_load", 7, protoreflect.FloatKind},      // GetResourceResponse field 7
		{&agentpb.HeartBeatRequest{}, "server_type", 1, protoreflect.EnumKind},        // HeartBeatRequest field 1
		{&agentpb.HeartBeatResponse{}, "addresses", 1, protoreflect.MessageKind},      // HeartBeatResponse field 1 (map)
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
	if n := (&agentpb.GetResourceRequest{}).ProtoReflect().Descriptor().Fields().Len(); n != 0 {
		t.Errorf("GetResourceRequest has %d fields, want none", n)
	}
	// HeartBeatResponse field 1 is map<string, AddressList>.
	fd := (&agentpb.HeartBeatResponse{}).ProtoReflect().Descriptor().Fields().ByNumber(1)
	if !fd.IsMap() || fd.MapKey().Kind() != protoreflect.StringKind ||
		fd.MapValue().Message().FullName() != "monolith.serving.agent_service.AddressList" {
		t.Errorf("HeartBeatResponse.addresses is not map<string, AddressList>: %v", fd)
	}
	// enum ServerType: PS = 0, ENTRY = 1, DENSE = 2.
	for name, want := range map[string]int32{"PS": 0, "ENTRY": 1, "DENSE": 2} {
		if got := agentpb.ServerType_value[name]; got != want {
			t.Errorf("ServerType %s = %d, want %d", name, got, want)
		}
	}
	if got := agentpb.ServerType_DENSE.Descriptor().FullName(); got != "monolith.serving.agent_service.ServerType" {
		t.Errorf("ServerType full name %q", got)
	}
}

// TestDynamicRoundTrip decodes the generated types' bytes with only the descriptor and
// checks that nothing is lost either way.
func TestDynamicRoundTrip(t *testing.T) {
	for _, msg := range []proto.Message{
		&agentpb.HeartBeatResponse{Addresses: map[string]*agentpb.AddressList{
			"ps:0":    {Address: []string{"10.0.0.1:8500", "10.0.0.2:8500"}},
			"dense:0": {Address: []string{"[fdbd::1]:8500"}},
			"empty":   {},
		}},
		&agentpb.GetReplicasRequest{ServerType: agentpb.ServerType_DENSE, Task: 3, ModelName: "test_ffm_model"},
		&agentpb.GetResourceResponse{Address: "10.0.0.1:2222", ShardId: 2, ReplicaId: 7, Memory: 1 << 40, Cpu: -1, Network: -1, WorkLoad: 0.5},
		&agentpb.HeartBeatRequest{ServerType: agentpb.ServerType_ENTRY},
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
			t.Errorf("%T: dynamic message differs: %v vs %v", msg, dyn, msg)
		}
		b2, err := proto.MarshalOptions{Deterministic: true}.Marshal(dyn)
		if err != nil {
			t.Fatal(err)
		}
		back := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b2, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(msg, back) {
			t.Errorf("%T: round trip through dynamicpb changed it: %v vs %v", msg, back, msg)
		}
	}
}
