package server

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/monolith-go/monolith/schemas/pspb"
)

// TestEveryRPCImplemented calls every method of the service descriptor with an empty
// request: none may answer Unimplemented (the generated UnimplementedParameterServerServer
// stubs are only protoc-gen-go-grpc's forward-compatibility fallback).
func TestEveryRPCImplemented(t *testing.T) {
	r := start(t, testOptions(t))
	ctx := testCtx(t)
	desc := pspb.ParameterServer_ServiceDesc
	if len(desc.Methods) < 9 {
		t.Fatalf("the service lists %d methods", len(desc.Methods))
	}
	for _, m := range desc.Methods {
		err := r.cc.Invoke(ctx, "/"+desc.ServiceName+"/"+m.MethodName, &emptypb.Empty{}, &emptypb.Empty{})
		if status.Code(err) == codes.Unimplemented {
			t.Errorf("%s: %v", m.MethodName, err)
		}
	}
}
