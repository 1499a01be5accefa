package codec

import (
	"runtime"

	"google.golang.org/grpc"
)

// Transport settings shared by the parameter server and its client, so that both ends of
// a PS connection agree.
const (
	// DefaultMaxMessageBytes bounds gRPC messages both ways unless configured otherwise.
	DefaultMaxMessageBytes = 64 << 20
	// DefaultMaxSubRequests is the most sub-requests a PS accepts in one batch RPC unless
	// configured otherwise, and the most its client puts in one.
	DefaultMaxSubRequests = 1024
	// WindowBytes is the HTTP/2 flow-control window of PS connections, per stream and per
	// connection. Embedding responses are large (1000 fids × dim 32 = 128 KiB): gRPC's
	// 64 KiB windows would stall every response on a WINDOW_UPDATE round trip.
	WindowBytes = 16 << 20
	// BufferBytes is the size of the read and write buffers of PS connections.
	BufferBytes = 256 << 10
)

// ServerOptions are the gRPC server options of a PS: ServerCodec, messages of up to
// maxMessageBytes both ways, WindowBytes windows and BufferBytes buffers, and one stream
// worker per CPU. Without workers gRPC starts a goroutine per RPC, whose stack grows
// (runtime.copystack) through the handler's deep calls on every request: about 2 % of a
// training run's CPU, where the PS serves several small RPCs per batch.
func ServerOptions(maxMessageBytes int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.InitialWindowSize(WindowBytes),
		grpc.InitialConnWindowSize(WindowBytes),
		grpc.ReadBufferSize(BufferBytes),
		grpc.WriteBufferSize(BufferBytes),
		grpc.ForceServerCodecV2(ServerCodec),
	}
}

// DialOptions are the matching gRPC dial options of a PS client: this codec, messages of
// up to maxMessageBytes both ways, WindowBytes windows and BufferBytes buffers.
func DialOptions(maxMessageBytes int) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes), grpc.ForceCodecV2(Codec)),
		grpc.WithInitialWindowSize(WindowBytes),
		grpc.WithInitialConnWindowSize(WindowBytes),
		grpc.WithReadBufferSize(BufferBytes),
		grpc.WithWriteBufferSize(BufferBytes),
	}
}
