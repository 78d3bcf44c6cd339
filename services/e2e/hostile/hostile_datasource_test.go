//go:build linux

package hostile

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func hostPath(mount, dir string) *workloadv1.DataSource {
	return &workloadv1.DataSource{MountPath: mount, ReadOnly: true,
		Source: &workloadv1.DataSource_HostPath{HostPath: &workloadv1.HostPathSource{Path: dir}}}
}

// A host-path data source reaches the node: a researcher may create none
// (and no data source at all), nor submit a one-off, nor smuggle one in
// beside a name or in a template; a department's administrator may create
// and change the department's NFS data sources but no host path, and
// cannot turn the account administrator's read-only host path writable.
// A researcher uses the host path its project was given, not another
// project's data sources.
func TestHostileDataSources(t *testing.T) {
	d := apiStartDev(t, nil)
	admin := workloadv1.NewDataSourceServiceClient(d.admin)
	for _, p := range []string{"projects/team-a", "projects/team-b"} {
		if _, err := admin.CreateDataSource(t.Context(), &workloadv1.CreateDataSourceRequest{Parent: p, DataSourceId: "datasets",
			DataSource: hostPath("/datasets", "/srv/"+strings.TrimPrefix(p, "projects/"))}); err != nil {
			t.Fatalf("the administrator creates %s's host path: %v", p, err)
		}
	}
	bob := d.conn(t, d.member(t, "bob", "roles/l2-researcher", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-b")))
	alice := d.conn(t, d.member(t, "alice", "roles/l1-researcher", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-a")))
	carol := d.conn(t, d.member(t, "carol", "roles/department-admin", apiScope(identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, "departments/dept-b")))

	bobDS := workloadv1.NewDataSourceServiceClient(bob)
	for _, ds := range []*workloadv1.DataSource{hostPath("/etc-of-node", "/etc"),
		{MountPath: "/data", Source: &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: "nfs", Path: "/x"}}}} {
		_, err := bobDS.CreateDataSource(t.Context(), &workloadv1.CreateDataSourceRequest{Parent: "projects/team-b", DataSourceId: "mine", DataSource: ds})
		apiWant(t, "bob creates a data source", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	}
	if _, err := bobDS.GetDataSource(t.Context(), &workloadv1.GetDataSourceRequest{Name: "projects/team-a/dataSources/datasets"}); err == nil {
		t.Error("bob reads team-a's data source")
	}

	submit := func(conn, project string, mounts ...*workloadv1.DataSourceMount) error {
		c := bob
		if conn == "alice" {
			c = alice
		}
		_, err := workloadv1.NewWorkloadServiceClient(c).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
			Parent: project, WorkloadId: "w-" + conn,
			Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
				Spec: &workloadv1.WorkloadSpec{Image: "img", Command: []string{"true"}, DataSources: mounts}}})
		return err
	}
	for _, tc := range []struct {
		what   string
		mounts []*workloadv1.DataSourceMount
		code   codes.Code
		field  string
	}{
		{"a one-off host path", []*workloadv1.DataSourceMount{{Source: hostPath("/host", "/")}}, codes.PermissionDenied, "workload.spec.data_sources"},
		{"a host path beside a name", []*workloadv1.DataSourceMount{{DataSource: "datasets", Source: hostPath("/datasets", "/etc")}},
			codes.PermissionDenied, "workload.spec.data_sources"},
		{"team-a's by full name", []*workloadv1.DataSourceMount{{DataSource: "projects/team-a/dataSources/datasets"}},
			codes.PermissionDenied, "workload.spec.data_sources[0].data_source"},
		{"dept-a's by full name", []*workloadv1.DataSourceMount{{DataSource: "departments/dept-a/dataSources/datasets"}},
			codes.PermissionDenied, "workload.spec.data_sources[0].data_source"},
	} {
		err := submit("bob", "projects/team-b", tc.mounts...)
		if status.Code(err) != tc.code || !slices.Contains(fieldsOf(err), tc.field) {
			t.Errorf("bob submits %s: %v, want %s naming %s", tc.what, err, tc.code, tc.field)
		}
	}
	if err := submit("alice", "projects/team-a", &workloadv1.DataSourceMount{DataSource: "datasets"}); err != nil {
		t.Errorf("alice uses her project's host path: %v", err)
	}
	if err := submit("bob", "projects/team-b", &workloadv1.DataSourceMount{DataSource: "datasets"}); err != nil {
		t.Errorf("bob uses his project's host path: %v", err)
	}

	tpl := workloadv1.NewGovernanceServiceClient(carol)
	_, err := tpl.CreateTemplate(t.Context(), &workloadv1.CreateTemplateRequest{Parent: "departments/dept-b", TemplateId: "hosty",
		Template: &workloadv1.Template{Spec: &workloadv1.WorkloadSpec{DataSources: []*workloadv1.DataSourceMount{{Source: hostPath("/h", "/")}}}}})
	apiWant(t, "carol puts a host path in a template", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)

	carolDS := workloadv1.NewDataSourceServiceClient(carol)
	_, err = carolDS.CreateDataSource(t.Context(), &workloadv1.CreateDataSourceRequest{Parent: "departments/dept-b", DataSourceId: "h",
		DataSource: hostPath("/h", "/var/lib")})
	apiWant(t, "carol creates a host path", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	if !slices.Contains(fieldsOf(err), "data_source.host_path") {
		t.Errorf("carol's refusal names no field: %v", err)
	}
	nfs, err := carolDS.CreateDataSource(t.Context(), &workloadv1.CreateDataSourceRequest{Parent: "departments/dept-b", DataSourceId: "shared",
		DataSource: &workloadv1.DataSource{MountPath: "/shared", Source: &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: "nfs", Path: "/x"}}}})
	if err != nil {
		t.Fatalf("carol creates an NFS data source: %v", err)
	}
	_, err = carolDS.UpdateDataSource(t.Context(), &workloadv1.UpdateDataSourceRequest{DataSource: &workloadv1.DataSource{Name: nfs.GetName(),
		MountPath: "/shared", Source: &workloadv1.DataSource_HostPath{HostPath: &workloadv1.HostPathSource{Path: "/"}}}})
	apiWant(t, "carol turns her NFS data source into a host path", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	_, err = carolDS.UpdateDataSource(t.Context(), &workloadv1.UpdateDataSourceRequest{
		DataSource: &workloadv1.DataSource{Name: "projects/team-b/dataSources/datasets", ReadOnly: false},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"read_only"}}})
	apiWant(t, "carol makes team-b's host path writable", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	got, err := admin.GetDataSource(t.Context(), &workloadv1.GetDataSourceRequest{Name: "projects/team-b/dataSources/datasets"})
	if err != nil || !got.GetReadOnly() || got.GetHostPath().GetPath() != "/srv/team-b" {
		t.Errorf("team-b's host path after carol: %v, %v", got, err)
	}
}

// fieldsOf is the fields an error's BadRequest detail names.
func fieldsOf(err error) []string {
	var out []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField())
			}
		}
	}
	return out
}
