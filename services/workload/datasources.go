package workload

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// DataSources implements workloadv1.DataSourceServiceServer: data sources
// are scoped assets like environments (the asset flow), and changeable.
// Who may create a host-path one (an account administrator) is pkg/auth's
// rule; the service checks what it holds.
type DataSources struct {
	workloadv1.UnimplementedDataSourceServiceServer

	g *Governance
}

var dataSourceAsset = asset[*workloadv1.DataSource]{
	collection: dataSourcesCollection, field: "data_source", idField: "data_source_id", resource: apierr.DataSource,
	items: func(g *Governance) *etcdstore.Collection[*workloadv1.DataSource] { return g.sources },
	check: func(v *violations, field string, d *workloadv1.DataSource) { checkDataSource(v, field, d) },
}

// maxDataSourceMounts bounds the data sources one workload mounts.
const maxDataSourceMounts = 16

var (
	// hostName is a DNS name or an IPv4 address: it goes into mount
	// options (addr=…), so nothing else may.
	hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)
	// kubeName is a Kubernetes object name (a DNS-1123 subdomain).
	kubeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	// gitRevision is a branch, tag or commit; never an option (-…).
	gitRevision = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]{0,254}$`)
	s3Bucket    = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// pathRule is what a mount path or host path must be: it is written into
// bind specifications (src:dst:ro) and mount options, so no ':' or ','.
const pathRule = "must be a clean absolute path other than /, without spaces, ':' or ','"

func badPath(p string) bool {
	return !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" ||
		strings.ContainsFunc(p, isSpaceOrControl) || strings.ContainsAny(p, ":,")
}

// checkDataSource lists what is wrong with a data source's definition (at
// field: "data_source", or a one-off's path in a spec).
func checkDataSource(v *violations, field string, d *workloadv1.DataSource) {
	switch mp := d.GetMountPath(); {
	case mp == "":
		v.add(field+".mount_path", "is required: the absolute path in the container, such as /data")
	case badPath(mp):
		v.add(field+".mount_path", pathRule)
	case slices.ContainsFunc([]string{"/proc", "/sys", "/dev"}, func(p string) bool { return mp == p || strings.HasPrefix(mp, p+"/") }):
		v.add(field+".mount_path", "must not be under /proc, /sys or /dev")
	}
	if len(d.GetDescription()) > 1024 {
		v.add(field+".description", "must be at most 1024 bytes")
	}
	switch s := d.GetSource().(type) {
	case nil:
		v.add(field+".source", "must set one of host_path, nfs, pvc, git, s3, config_map or secret")
	case *workloadv1.DataSource_HostPath:
		if badPath(s.HostPath.GetPath()) {
			v.add(field+".host_path.path", pathRule)
		}
	case *workloadv1.DataSource_Nfs:
		if !hostName.MatchString(s.Nfs.GetServer()) {
			v.add(field+".nfs.server", "must be a host name or an IPv4 address")
		}
		if badPath(s.Nfs.GetPath()) {
			v.add(field+".nfs.path", pathRule)
		}
	case *workloadv1.DataSource_Pvc:
		checkPVC(v, field+".pvc", s.Pvc)
	case *workloadv1.DataSource_Git:
		checkURL(v, field+".git.repository", s.Git.GetRepository(), true)
		if r := s.Git.GetRevision(); r != "" && (!gitRevision.MatchString(r) || strings.Contains(r, "..")) {
			v.add(field+".git.revision", "must be a branch, tag or commit: [A-Za-z0-9._/-], not starting with '-' or '.', without '..'")
		}
		checkRef(v, credentialAsset, s.Git.GetCredential(), field+".git.credential")
	case *workloadv1.DataSource_S3:
		checkURL(v, field+".s3.endpoint", s.S3.GetEndpoint(), false)
		if !s3Bucket.MatchString(s.S3.GetBucket()) {
			v.add(field+".s3.bucket", "must be a bucket name: 3-63 characters of [a-z0-9.-]")
		}
		if p := s.S3.GetPrefix(); strings.HasPrefix(p, "/") || strings.ContainsFunc(p, isSpaceOrControl) || strings.Contains(p, "..") {
			v.add(field+".s3.prefix", "must be a key prefix without a leading '/', spaces or '..'")
		}
		checkRef(v, credentialAsset, s.S3.GetCredential(), field+".s3.credential")
	case *workloadv1.DataSource_ConfigMap:
		if !kubeName.MatchString(s.ConfigMap.GetName()) {
			v.add(field+".config_map.name", "must be a Kubernetes object name (lower case [a-z0-9.-])")
		}
	case *workloadv1.DataSource_Secret:
		if !kubeName.MatchString(s.Secret.GetName()) {
			v.add(field+".secret.name", "must be a Kubernetes object name (lower case [a-z0-9.-])")
		}
	}
}

func checkPVC(v *violations, field string, p *workloadv1.PvcSource) {
	switch {
	case p.GetClaimName() != "":
		if !kubeName.MatchString(p.GetClaimName()) {
			v.add(field+".claim_name", "must be a Kubernetes object name (lower case [a-z0-9.-])")
		}
		if p.GetStorageClass() != "" || p.GetSizeBytes() != 0 || p.GetLifetime() != workloadv1.PvcLifetime_PVC_LIFETIME_UNSPECIFIED {
			v.add(field, "must set claim_name (an existing claim) or storage_class, size_bytes and lifetime (a new one), not both")
		}
	default:
		if !kubeName.MatchString(p.GetStorageClass()) {
			v.add(field+".storage_class", "is required without claim_name: a storage class name")
		}
		if p.GetSizeBytes() <= 0 {
			v.add(field+".size_bytes", "must be more than 0 bytes for a new claim")
		}
	}
}

// checkURL checks an http(s) URL that holds no password.
func checkURL(v *violations, field, raw string, git bool) {
	u, err := url.Parse(raw)
	switch {
	case raw == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsFunc(raw, isSpaceOrControl):
		v.add(field, "must be an https:// or http:// URL")
	case u.User != nil:
		if _, hasPassword := u.User.Password(); hasPassword || git {
			v.add(field, "must hold no user or password: name a credential instead")
		}
	}
}

// validateDataSourceMounts checks a spec's data sources: each names a data
// source or defines a one-off (a submitted workload's hold both: the name
// and its definition as resolved).
func validateDataSourceMounts(v *violations, at string, mounts []*workloadv1.DataSourceMount) {
	if len(mounts) > maxDataSourceMounts {
		v.add(at+".data_sources", fmt.Sprintf("must hold at most %d data sources", maxDataSourceMounts))
		return
	}
	paths := map[string]int{}
	for i, m := range mounts {
		field := fmt.Sprintf("%s.data_sources[%d]", at, i)
		checkRef(v, dataSourceAsset, m.GetDataSource(), field+".data_source")
		src := m.GetSource()
		switch {
		case m.GetDataSource() == "" && src == nil:
			v.add(field, "must name a data_source or define a one-off source")
			continue
		case src == nil:
			continue // resolved at submit
		case m.GetDataSource() == "" && src.GetName() != "":
			v.add(field+".source.name", "must be empty in a one-off data source")
		}
		checkDataSource(v, field+".source", src)
		if j, ok := paths[src.GetMountPath()]; ok {
			v.add(field+".source.mount_path", fmt.Sprintf("must be unique; data source %d mounts at it", j))
		}
		paths[src.GetMountPath()] = i
	}
}

// resolveDataSources puts in each named data source of a spec submitted
// to project p its stored definition (a name of a scope p may not use is
// refused), and checks the credentials the definitions name. What a spec
// holds for a named source itself is replaced, never trusted.
func (s *Server) resolveDataSources(ctx context.Context, p *quotav1.Project, spec *workloadv1.WorkloadSpec) error {
	visible := []string{"", p.GetDepartment(), p.GetName()}
	for i, m := range spec.GetDataSources() {
		field := fmt.Sprintf("workload.spec.data_sources[%d]", i)
		if ref := m.GetDataSource(); ref != "" {
			if scope, _, ok := parseScoped(ref, dataSourcesCollection); ok && !slices.Contains(visible, scope) {
				return apierr.PermissionDenied("datasources.use", ref).InField(field + ".data_source")
			}
			d, err := dataSourceAsset.resolve(ctx, s.gov, p, ref, field+".data_source")
			if err != nil {
				return err
			}
			m.DataSource = d.GetName()
			m.Source = proto.Clone(d).(*workloadv1.DataSource)
			m.Source.Etag, m.Source.Creator, m.Source.CreateTime, m.Source.UpdateTime = "", "", nil, nil
		}
		if m.GetSource() == nil {
			continue // reported by validateSpec
		}
		if err := s.dataSourceCredential(ctx, p, m.GetSource(), field+".source"); err != nil {
			return err
		}
	}
	var v violations
	paths := map[string]int{}
	for i, c := range spec.GetCredentials() {
		if c.GetPath() != "" {
			paths[c.GetPath()] = -1 - i
		}
	}
	for i, m := range spec.GetDataSources() {
		mp := m.GetSource().GetMountPath()
		if j, ok := paths[mp]; ok {
			what := fmt.Sprintf("data source %d", j)
			if j < 0 {
				what = fmt.Sprintf("credential %d", -1-j)
			}
			v.add(fmt.Sprintf("workload.spec.data_sources[%d]", i), fmt.Sprintf("mounts at %s, where %s is mounted", mp, what))
		}
		paths[mp] = i
	}
	return v.err()
}

// dataSourceCredential resolves the credential a git or s3 definition
// names to its full name, checking that p may use it and that its type
// fits.
func (s *Server) dataSourceCredential(ctx context.Context, p *quotav1.Project, d *workloadv1.DataSource, field string) error {
	var ref *string
	var want workloadv1.CredentialType
	switch {
	case d.GetGit() != nil:
		ref, want, field = &d.GetGit().Credential, workloadv1.CredentialType_CREDENTIAL_TYPE_GIT, field+".git.credential"
	case d.GetS3() != nil:
		ref, want, field = &d.GetS3().Credential, workloadv1.CredentialType_CREDENTIAL_TYPE_S3_KEYS, field+".s3.credential"
	default:
		return nil
	}
	if *ref == "" {
		return nil
	}
	it, err := credentialAsset.resolve(ctx, s.gov, p, *ref, field)
	if err != nil {
		return err
	}
	c := it.GetCredential()
	switch {
	case c.GetType() != want:
		return apierr.InvalidField(field, fmt.Sprintf("must be a %s credential; %s is %s", credentialTypeName(want), c.GetName(), credentialTypeName(c.GetType())))
	case want == workloadv1.CredentialType_CREDENTIAL_TYPE_GIT && !slices.Contains(c.GetKeys(), "token"):
		return apierr.InvalidField(field, fmt.Sprintf("must hold a token: %s holds an SSH key, and git data sources clone over http(s) only", c.GetName()))
	}
	*ref = c.GetName()
	return nil
}

// CreateDataSource stores a new data source at a scope.
func (d *DataSources) CreateDataSource(ctx context.Context, req *workloadv1.CreateDataSourceRequest) (*workloadv1.DataSource, error) {
	in := req.GetDataSource()
	if in != nil {
		in = proto.Clone(in).(*workloadv1.DataSource)
		in.Name, in.Creator, in.UpdateTime = "", "", nil
		if caller, ok := auth.CallerFrom(ctx); ok {
			in.Creator = caller.Principal
		}
	}
	return dataSourceAsset.create(ctx, d.g, req.GetParent(), req.GetDataSourceId(), in)
}

// GetDataSource returns one data source.
func (d *DataSources) GetDataSource(ctx context.Context, req *workloadv1.GetDataSourceRequest) (*workloadv1.DataSource, error) {
	return dataSourceAsset.get(ctx, d.g, req.GetName())
}

// ListDataSources pages through one scope's data sources.
func (d *DataSources) ListDataSources(ctx context.Context, req *workloadv1.ListDataSourcesRequest) (*workloadv1.ListDataSourcesResponse, error) {
	items, next, err := dataSourceAsset.list(ctx, d.g, req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &workloadv1.ListDataSourcesResponse{DataSources: items, NextPageToken: next}, nil
}

// DeleteDataSource removes a data source; workloads submitted before keep
// their copy of it.
func (d *DataSources) DeleteDataSource(ctx context.Context, req *workloadv1.DeleteDataSourceRequest) (*emptypb.Empty, error) {
	return dataSourceAsset.delete(ctx, d.g, req.GetName(), req.GetEtag())
}

// UpdateDataSource changes the fields of the mask (all when empty),
// conditioned on the stored revision read (and on the request's etag).
func (d *DataSources) UpdateDataSource(ctx context.Context, req *workloadv1.UpdateDataSourceRequest) (*workloadv1.DataSource, error) {
	in := req.GetDataSource()
	scope, id, err := dataSourceAsset.parse(in.GetName(), "data_source.name")
	if err != nil {
		return nil, err
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 || slices.Equal(paths, []string{"*"}) {
		paths = []string{"description", "mount_path", "read_only", "source"}
	}
	cur, err := d.g.sources.Get(ctx, storeKey(scope, id))
	if err != nil {
		return nil, storeError(err, apierr.DataSource, in.GetName())
	}
	etag := cur.Etag
	if e := in.GetEtag(); e != "" && e != etag {
		return nil, apierr.EtagMismatch(in.GetName(), etag)
	}
	out := proto.Clone(cur.Msg).(*workloadv1.DataSource)
	for _, p := range paths {
		switch p {
		case "description":
			out.Description = in.GetDescription()
		case "mount_path":
			out.MountPath = in.GetMountPath()
		case "read_only":
			out.ReadOnly = in.GetReadOnly()
		case "source":
			out.Source = proto.Clone(in).(*workloadv1.DataSource).Source
		default:
			return nil, apierr.InvalidField("update_mask", fmt.Sprintf("names %q; it may name description, mount_path, read_only and source", p))
		}
	}
	var v violations
	checkDataSource(&v, "data_source", out)
	if err := v.err(); err != nil {
		return nil, err
	}
	out.Etag, out.UpdateTime = "", timestamppb.New(d.g.clock.Now())
	it, err := d.g.sources.Update(ctx, storeKey(scope, id), out, etag)
	if err != nil {
		return nil, storeError(err, apierr.DataSource, in.GetName())
	}
	return withEtag(it), nil
}
