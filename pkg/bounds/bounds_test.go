package bounds_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/bounds"
)

func TestCheckNamesTheField(t *testing.T) {
	long := strings.Repeat("a", bounds.String+1)
	labels := map[string]string{}
	for i := range bounds.MapItems + 1 {
		labels[strings.Repeat("k", i+1)] = "v"
	}
	for _, c := range []struct {
		msg   proto.Message
		field string // "" when within bounds
	}{
		{&identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{Password: &identityv1.PasswordCredentials{User: long}}}, "password.user"},
		{&identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: long}}}, ""},
		{&workloadv1.CreateWorkloadRequest{Workload: &workloadv1.Workload{Spec: &workloadv1.WorkloadSpec{
			Env: []*workloadv1.EnvVar{{Name: "A", Value: "x"}, {Name: long, Value: "y"}}}}}, "workload.spec.env[1].name"},
		{&workloadv1.CreateWorkloadRequest{Workload: &workloadv1.Workload{Spec: &workloadv1.WorkloadSpec{
			Args: make([]string, bounds.Entries+1)}}}, "workload.spec.args"},
		{&quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{NodeSelector: labels}}, "node_pool.node_selector"},
		{&quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{NodeSelector: map[string]string{"zone": long}}}, "node_pool.node_selector[zone]"},
		{&identityv1.ListUsersRequest{PageSize: -1}, "page_size"},
		{&identityv1.ListUsersRequest{PageSize: 5000}, ""},
	} {
		err := bounds.Check(c.msg)
		if c.field == "" {
			if err != nil {
				t.Errorf("%T: %v, want within bounds", c.msg, err)
			}
			continue
		}
		if apierr.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%T: %v, want INVALID_ARGUMENT naming %s", c.msg, err, c.field)
		}
	}
}
