package workload_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func nfsSource(mount string) *workloadv1.DataSource {
	return &workloadv1.DataSource{MountPath: mount, Source: &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: "nfs.example.com", Path: "/exports/data"}}}
}

func gitSource(mount, repo, cred string) *workloadv1.DataSource {
	return &workloadv1.DataSource{MountPath: mount, ReadOnly: true,
		Source: &workloadv1.DataSource_Git{Git: &workloadv1.GitSource{Repository: repo, Revision: "main", Credential: cred}}}
}

// Every malformed definition is refused naming its field; the one-off and
// named forms share the rules.
func TestDataSources_CreateChecksEachType(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	ctx := t.Context()
	ds := func(mount string, src any) *workloadv1.DataSource {
		d := &workloadv1.DataSource{MountPath: mount}
		switch s := src.(type) {
		case *workloadv1.HostPathSource:
			d.Source = &workloadv1.DataSource_HostPath{HostPath: s}
		case *workloadv1.NfsSource:
			d.Source = &workloadv1.DataSource_Nfs{Nfs: s}
		case *workloadv1.PvcSource:
			d.Source = &workloadv1.DataSource_Pvc{Pvc: s}
		case *workloadv1.GitSource:
			d.Source = &workloadv1.DataSource_Git{Git: s}
		case *workloadv1.S3Source:
			d.Source = &workloadv1.DataSource_S3{S3: s}
		case *workloadv1.ConfigMapSource:
			d.Source = &workloadv1.DataSource_ConfigMap{ConfigMap: s}
		case *workloadv1.SecretSource:
			d.Source = &workloadv1.DataSource_Secret{Secret: s}
		}
		return d
	}
	for _, tc := range []struct {
		name  string
		d     *workloadv1.DataSource
		field string
	}{
		{"no source", &workloadv1.DataSource{MountPath: "/data"}, "data_source.source"},
		{"no mount", ds("", &workloadv1.NfsSource{Server: "s", Path: "/p"}), "data_source.mount_path"},
		{"relative mount", ds("data", &workloadv1.NfsSource{Server: "s", Path: "/p"}), "data_source.mount_path"},
		{"mount under /proc", ds("/proc/x", &workloadv1.NfsSource{Server: "s", Path: "/p"}), "data_source.mount_path"},
		{"mount with a colon", ds("/a:b", &workloadv1.NfsSource{Server: "s", Path: "/p"}), "data_source.mount_path"},
		{"host path dotted", ds("/data", &workloadv1.HostPathSource{Path: "/srv/../etc"}), "data_source.host_path.path"},
		{"nfs server with options", ds("/data", &workloadv1.NfsSource{Server: "s,nolock", Path: "/p"}), "data_source.nfs.server"},
		{"nfs path with options", ds("/data", &workloadv1.NfsSource{Server: "s", Path: "/p,vers=2"}), "data_source.nfs.path"},
		{"pvc neither", ds("/data", &workloadv1.PvcSource{}), "data_source.pvc.storage_class"},
		{"pvc both", ds("/data", &workloadv1.PvcSource{ClaimName: "c", StorageClass: "fast", SizeBytes: 1}), "data_source.pvc"},
		{"pvc no size", ds("/data", &workloadv1.PvcSource{StorageClass: "fast"}), "data_source.pvc.size_bytes"},
		{"git file url", ds("/src", &workloadv1.GitSource{Repository: "file:///etc"}), "data_source.git.repository"},
		{"git password in url", ds("/src", &workloadv1.GitSource{Repository: "https://u:p@git.example.com/r.git"}), "data_source.git.repository"},
		{"git option revision", ds("/src", &workloadv1.GitSource{Repository: "https://git.example.com/r.git", Revision: "--upload-pack=x"}), "data_source.git.revision"},
		{"git bad credential", ds("/src", &workloadv1.GitSource{Repository: "https://git.example.com/r.git", Credential: "Bad Name"}), "data_source.git.credential"},
		{"s3 bucket", ds("/s3", &workloadv1.S3Source{Endpoint: "http://s3:9000", Bucket: "B"}), "data_source.s3.bucket"},
		{"s3 endpoint", ds("/s3", &workloadv1.S3Source{Endpoint: "s3:9000", Bucket: "bucket"}), "data_source.s3.endpoint"},
		{"config map name", ds("/cfg", &workloadv1.ConfigMapSource{Name: "Cfg"}), "data_source.config_map.name"},
		{"secret name", ds("/sec", &workloadv1.SecretSource{}), "data_source.secret.name"},
	} {
		_, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "projects/team-a", DataSourceId: "d", DataSource: tc.d})
		wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
		if _, ok := violations(err)[tc.field]; !ok {
			t.Errorf("%s: violations %v, want %s", tc.name, violations(err), tc.field)
		}
	}
	_, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "projects/nope", DataSourceId: "d", DataSource: nfsSource("/data")})
	wantError(t, err, codes.NotFound, "PROJECT_NOT_FOUND")
	for _, d := range []*workloadv1.DataSource{
		ds("/a", &workloadv1.HostPathSource{Path: "/srv/datasets"}),
		ds("/b", &workloadv1.PvcSource{ClaimName: "shared"}),
		ds("/c", &workloadv1.PvcSource{StorageClass: "fast", SizeBytes: 1 << 30, Lifetime: workloadv1.PvcLifetime_PVC_LIFETIME_DELETED_WITH_WORKLOAD}),
		ds("/d", &workloadv1.S3Source{Endpoint: "http://127.0.0.1:9000", Bucket: "data", Prefix: "train/"}),
		ds("/e", &workloadv1.ConfigMapSource{Name: "settings"}),
	} {
		if _, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "projects/team-a", DataSourceId: "ok" + d.GetMountPath()[1:], DataSource: d}); err != nil {
			t.Errorf("create %v: %v", d, err)
		}
	}
}

// CRUD with etags and pages; an update changes the fields of its mask
// only; the REST routes answer.
func TestDataSources_CRUD(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	ctx := t.Context()
	got, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "departments/research", DataSourceId: "imagenet",
		DataSource: nfsSource("/data")})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetName() != "departments/research/dataSources/imagenet" || got.GetEtag() == "" || got.GetCreateTime() == nil {
		t.Fatalf("created %v", got)
	}
	_, err = e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "departments/research", DataSourceId: "imagenet", DataSource: nfsSource("/data")})
	wantError(t, err, codes.AlreadyExists, "DATA_SOURCE_ALREADY_EXISTS")
	for _, id := range []string{"b", "c"} {
		if _, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "departments/research", DataSourceId: id, DataSource: nfsSource("/" + id)}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := e.sources.ListDataSources(ctx, &workloadv1.ListDataSourcesRequest{Parent: "departments/research", PageSize: 2})
	if err != nil || len(first.GetDataSources()) != 2 || first.GetNextPageToken() == "" {
		t.Fatalf("page 1: %v, %v", first, err)
	}
	second, err := e.sources.ListDataSources(ctx, &workloadv1.ListDataSourcesRequest{Parent: "departments/research", PageSize: 2, PageToken: first.GetNextPageToken()})
	if err != nil || len(second.GetDataSources()) != 1 || second.GetNextPageToken() != "" {
		t.Fatalf("page 2: %v, %v", second, err)
	}

	upd, err := e.sources.UpdateDataSource(ctx, &workloadv1.UpdateDataSourceRequest{
		DataSource: &workloadv1.DataSource{Name: got.GetName(), ReadOnly: true, MountPath: "/ignored", Etag: got.GetEtag()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"read_only"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !upd.GetReadOnly() || upd.GetMountPath() != "/data" || upd.GetNfs().GetServer() != "nfs.example.com" || upd.GetEtag() == got.GetEtag() || upd.GetUpdateTime() == nil {
		t.Errorf("updated %v", upd)
	}
	_, err = e.sources.UpdateDataSource(ctx, &workloadv1.UpdateDataSourceRequest{DataSource: &workloadv1.DataSource{Name: got.GetName(), Etag: got.GetEtag()}})
	wantError(t, err, codes.Aborted, "ETAG_MISMATCH")
	_, err = e.sources.UpdateDataSource(ctx, &workloadv1.UpdateDataSourceRequest{DataSource: &workloadv1.DataSource{Name: got.GetName()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"creator"}}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	_, err = e.sources.UpdateDataSource(ctx, &workloadv1.UpdateDataSourceRequest{DataSource: &workloadv1.DataSource{Name: got.GetName()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"source"}}})
	if _, ok := violations(err)["data_source.source"]; !ok {
		t.Errorf("an update clearing the source: %v", err)
	}

	code, body := e.do(t, http.MethodGet, "/v1/departments/research/dataSources/imagenet", "")
	var rest map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &rest) != nil || rest["mountPath"] != "/data" || rest["readOnly"] != true {
		t.Errorf("REST get: %d %s", code, body)
	}
	code, body = e.do(t, http.MethodPost, "/v1/projects/team-a/dataSources?dataSourceId=code",
		`{"mountPath":"/src","git":{"repository":"https://git.example.com/r.git"}}`)
	if code != http.StatusOK {
		t.Errorf("REST create: %d %s", code, body)
	}

	if _, err := e.sources.DeleteDataSource(ctx, &workloadv1.DeleteDataSourceRequest{Name: got.GetName()}); err != nil {
		t.Fatal(err)
	}
	_, err = e.sources.GetDataSource(ctx, &workloadv1.GetDataSourceRequest{Name: got.GetName()})
	wantError(t, err, codes.NotFound, "DATA_SOURCE_NOT_FOUND")
}

// A submit resolves names into definitions (of the project, its
// department or the account only), checks the credentials they name, and
// refuses two mounts at one path; a stored copy is the workload's.
func TestDataSources_ResolvedAtSubmit(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "ops"})
	ctx := t.Context()
	mk := func(parent, id string, d *workloadv1.DataSource) {
		t.Helper()
		if _, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: parent, DataSourceId: id, DataSource: d}); err != nil {
			t.Fatal(err)
		}
	}
	mk("departments/research", "imagenet", nfsSource("/data"))
	mk("projects/team-b", "theirs", nfsSource("/theirs"))
	mk("departments/ops", "ops-data", nfsSource("/ops"))
	if _, err := e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "projects/team-a", CredentialId: "gh",
		Credential: &workloadv1.Credential{Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GIT, Values: map[string]string{"token": "t0ken"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "projects/team-a", CredentialId: "env",
		Credential: generic(map[string]string{"K": "v"})}); err != nil {
		t.Fatal(err)
	}
	submit := func(mounts ...*workloadv1.DataSourceMount) (*workloadv1.Workload, error) {
		w := training()
		w.Spec.DataSources = mounts
		return e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "w", Workload: w})
	}

	// Another project's and another department's: refused, naming the field.
	for _, ref := range []string{"projects/team-b/dataSources/theirs", "departments/ops/dataSources/ops-data"} {
		_, err := submit(&workloadv1.DataSourceMount{DataSource: ref})
		wantError(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
		if _, ok := violations(err)["workload.spec.data_sources[0].data_source"]; !ok {
			t.Errorf("%s: violations %v", ref, violations(err))
		}
	}
	_, err := submit(&workloadv1.DataSourceMount{DataSource: "theirs"}) // an id is looked up in team-a's scopes only
	wantError(t, err, codes.NotFound, "DATA_SOURCE_NOT_FOUND")
	_, err = submit(&workloadv1.DataSourceMount{DataSource: "imagenet"}, &workloadv1.DataSourceMount{Source: nfsSource("/data")})
	if _, ok := violations(err)["workload.spec.data_sources[1]"]; !ok {
		t.Errorf("two mounts at /data: %v", err)
	}
	_, err = submit(&workloadv1.DataSourceMount{Source: gitSource("/src", "https://git.example.com/r.git", "env")})
	if _, ok := violations(err)["workload.spec.data_sources[0].source.git.credential"]; !ok {
		t.Errorf("a generic credential for git: %v", err)
	}
	_, err = submit(&workloadv1.DataSourceMount{})
	if _, ok := violations(err)["workload.spec.data_sources[0]"]; !ok {
		t.Errorf("an empty mount: %v", err)
	}

	// A named source's definition is the stored one, whatever the
	// submission claims it is.
	w, err := submit(&workloadv1.DataSourceMount{DataSource: "imagenet", Source: &workloadv1.DataSource{MountPath: "/x",
		Source: &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: "evil", Path: "/"}}}},
		&workloadv1.DataSourceMount{Source: gitSource("/src", "https://git.example.com/r.git", "gh")})
	if err != nil {
		t.Fatal(err)
	}
	got := w.GetSpec().GetDataSources()
	if got[0].GetDataSource() != "departments/research/dataSources/imagenet" || got[0].GetSource().GetMountPath() != "/data" ||
		got[0].GetSource().GetNfs().GetServer() != "nfs.example.com" || got[0].GetSource().GetEtag() != "" {
		t.Errorf("resolved %v", got[0])
	}
	if got[1].GetSource().GetGit().GetCredential() != "projects/team-a/credentials/gh" {
		t.Errorf("git credential resolved to %q", got[1].GetSource().GetGit().GetCredential())
	}

	// The node agent gets the git token through ResolvePodCredentials.
	if _, err := e.etcd.Client.Put(ctx, "/runway/v1/bindings/node-1/team-a.w.0", "x"); err != nil {
		t.Fatal(err)
	}
	resp, err := e.creds.ResolvePodCredentials(ctx, &workloadv1.ResolvePodCredentialsRequest{Node: "nodes/node-1", Workload: "projects/team-a/workloads/w"})
	if err != nil {
		t.Fatal(err)
	}
	if toks := resp.GetGitTokens(); len(toks) != 1 || toks[0].GetDataSourceIndex() != 1 || toks[0].GetToken() != "t0ken" {
		t.Errorf("git tokens %v", toks)
	}
}

// A template's data sources (a name and a one-off) are resolved at the
// submit that uses it, against the submitting project; a template naming
// a malformed one is refused at create, naming the field.
func TestDataSources_InTemplates(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "ops"})
	ctx := t.Context()
	if _, err := e.sources.CreateDataSource(ctx, &workloadv1.CreateDataSourceRequest{Parent: "projects/team-a", DataSourceId: "imagenet",
		DataSource: nfsSource("/data")}); err != nil {
		t.Fatal(err)
	}
	_, err := e.gov.CreateTemplate(ctx, &workloadv1.CreateTemplateRequest{TemplateId: "bad", Template: &workloadv1.Template{
		Spec: &workloadv1.WorkloadSpec{DataSources: []*workloadv1.DataSourceMount{{Source: gitSource("/src", "ftp://x", "")}}}}})
	if _, ok := violations(err)["template.spec.data_sources[0].source.git.repository"]; !ok {
		t.Errorf("a template with a bad one-off: %v", err)
	}
	if _, err := e.gov.CreateTemplate(ctx, &workloadv1.CreateTemplateRequest{TemplateId: "with-data", Template: &workloadv1.Template{
		Spec: &workloadv1.WorkloadSpec{DataSources: []*workloadv1.DataSourceMount{{DataSource: "imagenet"},
			{Source: gitSource("/src", "https://git.example.com/r.git", "")}}}}}); err != nil {
		t.Fatal(err)
	}
	submit := func(project string) (*workloadv1.Workload, error) {
		w := training()
		return e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/" + project, WorkloadId: "w", Workload: w, Template: "with-data"})
	}
	w, err := submit("team-a")
	if err != nil {
		t.Fatal(err)
	}
	if ds := w.GetSpec().GetDataSources(); len(ds) != 2 || ds[0].GetSource().GetNfs().GetServer() != "nfs.example.com" || ds[1].GetSource().GetGit() == nil {
		t.Errorf("submitted with the template: %v", ds)
	}
	_, err = submit("team-b") // imagenet is team-a's
	wantError(t, err, codes.NotFound, "DATA_SOURCE_NOT_FOUND")
}
