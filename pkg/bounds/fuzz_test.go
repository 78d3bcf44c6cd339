package bounds_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	_ "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	_ "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	_ "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	_ "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/bounds"
)

// requestTypes are the request messages of every RPC of the API, in a
// fixed order.
func requestTypes(t testing.TB) []protoreflect.MessageType {
	var out []protoreflect.MessageType
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			ms := fd.Services().Get(i).Methods()
			for j := range ms.Len() {
				mt, err := protoregistry.GlobalTypes.FindMessageByName(ms.Get(j).Input().FullName())
				if err == nil && fd.Package() != "grpc.health.v1" {
					out = append(out, mt)
				}
			}
		}
		return true
	})
	if len(out) < 50 {
		t.Fatalf("%d request types found", len(out))
	}
	return out
}

// FuzzRequestDecoders decodes arbitrary bytes as every request of the API,
// as gRPC (binary) and REST (JSON) read them, and holds each to the bounds:
// nothing panics, and a decoded request is either within the bounds or
// refused (Check is deterministic).
func FuzzRequestDecoders(f *testing.F) {
	types := requestTypes(f)
	f.Add(uint16(0), []byte(`{"password":{"user":"alice","password":"x"}}`))
	f.Add(uint16(3), []byte(`{"parent":"projects/a","workload":{"spec":{"env":[{"name":"A","value":"b"}]}}}`))
	f.Add(uint16(7), []byte{0x0a, 0x03, 'a', 'b', 'c', 0x10, 0x7f})
	f.Add(uint16(11), []byte(`{"pageSize":-1}`))
	f.Fuzz(func(t *testing.T, which uint16, b []byte) {
		mt := types[int(which)%len(types)]
		for _, decode := range []func([]byte, proto.Message) error{
			proto.Unmarshal,
			func(b []byte, m proto.Message) error { return protojson.Unmarshal(b, m) },
		} {
			m := mt.New().Interface()
			if decode(b, m) != nil {
				continue
			}
			err1, err2 := bounds.Check(m), bounds.Check(m)
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("Check is not deterministic on %v", m)
			}
		}
	})
}
