package workload

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/sealing"
)

// Credentials implements workloadv1.CredentialServiceServer. A credential
// is stored as a SealedCredential: the resource without its values, and the
// values sealed under the platform key ring (pkg/sealing) with the
// credential's name as additional data. Values leave the service only in
// ResolvePodCredentials, to the agent of a node a pod using them is bound
// to.
type Credentials struct {
	workloadv1.UnimplementedCredentialServiceServer

	g     *Governance
	store *store
	ring  *sealing.Ring // nil: no key file; creating a credential fails
}

// Limits on what one credential holds, so that a pod's environment and
// etcd's request size stay bounded.
const (
	maxCredentialKeys       = 100
	maxCredentialValueBytes = 64 << 10
	maxCredentialBytes      = 256 << 10
)

// credentialAsset gives credentials the scope rules of environments: names,
// lookup at submit (resolve) and delete.
var credentialAsset = asset[*workloadv1.SealedCredential]{
	collection: credentialsCollection, field: "credential", idField: "credential_id", resource: apierr.Credential,
	items: func(g *Governance) *etcdstore.Collection[*workloadv1.SealedCredential] { return g.creds },
}

// The fixed keys of the typed credentials.
var credentialKeys = map[workloadv1.CredentialType]struct{ required, optional []string }{
	workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY: {required: []string{"username", "password"}},
	workloadv1.CredentialType_CREDENTIAL_TYPE_S3_KEYS:  {required: []string{"access_key_id", "secret_access_key"}},
	workloadv1.CredentialType_CREDENTIAL_TYPE_GIT:      {optional: []string{"token", "ssh_private_key", "username"}},
}

// checkCredential lists what is wrong with a credential to create.
func checkCredential(v *violations, c *workloadv1.Credential) {
	vals := c.GetValues()
	typ := c.GetType()
	switch typ {
	case workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC:
		if len(vals) == 0 {
			v.add("credential.values", "must hold at least one KEY=VALUE")
		}
		for _, k := range sortedKeys(vals) {
			if !envName.MatchString(k) {
				v.add("credential.values["+k+"]", "must be named like an environment variable, [A-Za-z_][A-Za-z0-9_]*")
			}
		}
	case workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY, workloadv1.CredentialType_CREDENTIAL_TYPE_S3_KEYS,
		workloadv1.CredentialType_CREDENTIAL_TYPE_GIT:
		want := credentialKeys[typ]
		for _, k := range want.required {
			if vals[k] == "" {
				v.add("credential.values["+k+"]", "is required for a "+credentialTypeName(typ)+" credential")
			}
		}
		for _, k := range sortedKeys(vals) {
			if !slices.Contains(want.required, k) && !slices.Contains(want.optional, k) {
				v.add("credential.values["+k+"]", "is not a key of a "+credentialTypeName(typ)+
					" credential; its keys are "+strings.Join(append(append([]string(nil), want.required...), want.optional...), ", "))
			}
		}
		if typ == workloadv1.CredentialType_CREDENTIAL_TYPE_GIT && (vals["token"] == "") == (vals["ssh_private_key"] == "") {
			v.add("credential.values", "must hold exactly one of token and ssh_private_key")
		}
	default:
		v.add("credential.type", "must be GENERIC, REGISTRY, S3_KEYS or GIT")
	}
	if typ == workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY {
		if s := c.GetServer(); s == "" || strings.ContainsFunc(s, isSpaceOrControl) || strings.Contains(s, "/") {
			v.add("credential.server", "is required for a registry credential: a host[:port] such as registry.example.com:5000")
		}
	} else if c.GetServer() != "" {
		v.add("credential.server", "is set only for a registry credential")
	}
	total := 0
	for k, val := range vals {
		total += len(k) + len(val)
		if len(val) > maxCredentialValueBytes {
			v.add("credential.values["+k+"]", fmt.Sprintf("holds %d bytes; at most %d", len(val), maxCredentialValueBytes))
		}
	}
	if len(vals) > maxCredentialKeys {
		v.add("credential.values", fmt.Sprintf("holds %d keys; at most %d", len(vals), maxCredentialKeys))
	}
	if total > maxCredentialBytes {
		v.add("credential.values", fmt.Sprintf("holds %d bytes of keys and values; at most %d", total, maxCredentialBytes))
	}
	if len(c.GetDescription()) > 1024 {
		v.add("credential.description", "must be at most 1024 bytes")
	}
}

// credentialTypeName is the CLI's name of a type: "s3-keys".
func credentialTypeName(t workloadv1.CredentialType) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.String(), "CREDENTIAL_TYPE_")), "_", "-")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// noKeyFile is the error of a service started without a key file.
func noKeyFile(name string) error {
	return apierr.FailedPrecondition(commonv1.ErrorReason_CREDENTIAL_KEY_MISSING, name,
		"The workload service holds no credentials key; start it with --credentials-key-file.").With("keyId", "")
}

// CreateCredential seals the values and stores the credential.
func (c *Credentials) CreateCredential(ctx context.Context, req *workloadv1.CreateCredentialRequest) (*workloadv1.Credential, error) {
	var v violations
	parent, id := req.GetParent(), req.GetCredentialId()
	if !parseScope(parent) {
		v.add("parent", "must be empty (the account), departments/{department} or projects/{project}")
	}
	if !validID(id) {
		v.add("credential_id", idRule)
	}
	in := req.GetCredential()
	if in == nil {
		v.add("credential", "is required")
	} else {
		checkCredential(&v, in)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	name := scopedName(parent, credentialsCollection, id)
	if c.ring == nil {
		return nil, noKeyFile(name)
	}
	if err := c.g.checkScopeExists(ctx, parent, "parent"); err != nil {
		return nil, err
	}
	out := &workloadv1.Credential{Name: name, Type: in.GetType(), Description: in.GetDescription(), Server: in.GetServer(),
		Keys: sortedKeys(in.GetValues()), CreateTime: timestamppb.New(c.g.clock.Now())}
	if caller, ok := auth.CallerFrom(ctx); ok {
		out.Creator = caller.Principal
	}
	sealed, err := c.seal(out, in.GetValues())
	if err != nil {
		return nil, err
	}
	it, err := c.g.creds.Create(ctx, storeKey(parent, id), sealed)
	if err != nil {
		return nil, storeError(err, apierr.Credential, name)
	}
	return public(it), nil
}

// seal is the stored form of cred holding values.
func (c *Credentials) seal(cred *workloadv1.Credential, values map[string]string) (*workloadv1.SealedCredential, error) {
	plain, err := proto.MarshalOptions{Deterministic: true}.Marshal(&workloadv1.CredentialValues{Values: values})
	if err != nil {
		return nil, err
	}
	keyID, nonce, ct, err := c.ring.Seal(plain, []byte(cred.GetName()))
	clear(plain)
	if err != nil {
		return nil, fmt.Errorf("seal credential %s: %w", cred.GetName(), err)
	}
	return &workloadv1.SealedCredential{Credential: cred, KeyId: keyID, Nonce: nonce, Ciphertext: ct}, nil
}

// open returns a stored credential's values.
func (c *Credentials) open(s *workloadv1.SealedCredential) (map[string]string, error) {
	name := s.GetCredential().GetName()
	if c.ring == nil {
		return nil, noKeyFile(name)
	}
	plain, err := c.ring.Open(s.GetKeyId(), s.GetNonce(), s.GetCiphertext(), []byte(name))
	if errors.Is(err, sealing.ErrUnknownKey) {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_CREDENTIAL_KEY_MISSING, name,
			fmt.Sprintf("Credential %s is sealed under key %q, which the key file no longer holds; put the key back, or create the credential again.", name, s.GetKeyId())).
			With("keyId", s.GetKeyId())
	}
	if err != nil {
		return nil, err
	}
	vals := new(workloadv1.CredentialValues)
	if err := proto.Unmarshal(plain, vals); err != nil {
		return nil, fmt.Errorf("decode credential %s: %w", name, err)
	}
	return vals.GetValues(), nil
}

// public is what callers see of a stored credential: never its values.
func public(it etcdstore.Item[*workloadv1.SealedCredential]) *workloadv1.Credential {
	out := proto.Clone(it.Msg.GetCredential()).(*workloadv1.Credential)
	out.Values = nil
	out.Etag = it.Etag
	return out
}

// GetCredential returns a credential's type, server and keys.
func (c *Credentials) GetCredential(ctx context.Context, req *workloadv1.GetCredentialRequest) (*workloadv1.Credential, error) {
	scope, id, err := credentialAsset.parse(req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	it, err := c.g.creds.Get(ctx, storeKey(scope, id))
	if err != nil {
		return nil, storeError(err, apierr.Credential, req.GetName())
	}
	return public(it), nil
}

// ListCredentials pages through one scope's credentials.
func (c *Credentials) ListCredentials(ctx context.Context, req *workloadv1.ListCredentialsRequest) (*workloadv1.ListCredentialsResponse, error) {
	parent := req.GetParent()
	if !parseScope(parent) {
		return nil, apierr.InvalidField("parent", "must be empty (the account), departments/{department} or projects/{project}")
	}
	if req.GetPageSize() < 0 {
		return nil, apierr.InvalidField("page_size", "must be 0 or more (0 means 100)")
	}
	page, err := c.g.creds.List(ctx, storeKey(parent, ""), etcdstore.PageSize(int(req.GetPageSize())), req.GetPageToken())
	if err != nil {
		return nil, storeError(err, apierr.Credential, parent)
	}
	out := &workloadv1.ListCredentialsResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		out.Credentials = append(out.Credentials, public(it))
	}
	return out, nil
}

// DeleteCredential removes a credential, values and all.
func (c *Credentials) DeleteCredential(ctx context.Context, req *workloadv1.DeleteCredentialRequest) (*emptypb.Empty, error) {
	return credentialAsset.delete(ctx, c.g, req.GetName(), req.GetEtag())
}

// ReencryptCredentials seals every credential not under the newest key
// again under it; each write is conditioned on the credential being the one
// read, and a credential changed meanwhile is read again.
func (c *Credentials) ReencryptCredentials(ctx context.Context, _ *workloadv1.ReencryptCredentialsRequest) (*workloadv1.ReencryptCredentialsResponse, error) {
	if c.ring == nil {
		return nil, noKeyFile("")
	}
	newest, err := c.ring.Newest()
	if err != nil {
		return nil, err
	}
	all, _, err := c.g.creds.ListAll(ctx, "")
	if err != nil {
		return nil, storeError(err, apierr.Credential, "")
	}
	out := &workloadv1.ReencryptCredentialsResponse{KeyId: newest}
	for _, it := range all {
		for attempt := 0; ; attempt++ {
			if it.Msg.GetKeyId() == newest {
				out.Unchanged++
				break
			}
			vals, err := c.open(it.Msg)
			if err != nil {
				return nil, err
			}
			sealed, err := c.seal(it.Msg.GetCredential(), vals)
			if err != nil {
				return nil, err
			}
			_, err = c.g.creds.Update(ctx, it.ID, sealed, it.Etag)
			if err == nil {
				out.Reencrypted++
				break
			}
			var mismatch *etcdstore.EtagMismatchError
			if errors.Is(err, etcdstore.ErrNotFound) {
				break // deleted meanwhile
			}
			if !errors.As(err, &mismatch) || attempt >= c.g.retries {
				return nil, storeError(err, apierr.Credential, it.Msg.GetCredential().GetName())
			}
			if it, err = c.g.creds.Get(ctx, it.ID); errors.Is(err, etcdstore.ErrNotFound) {
				break
			} else if err != nil {
				return nil, storeError(err, apierr.Credential, "")
			}
		}
	}
	return out, nil
}

// ResolvePodCredentials opens the credentials one pod uses, for the agent
// of the node the pod is bound to.
func (c *Credentials) ResolvePodCredentials(ctx context.Context, req *workloadv1.ResolvePodCredentialsRequest) (*workloadv1.ResolvePodCredentialsResponse, error) {
	var v violations
	node, ok := strings.CutPrefix(req.GetNode(), "nodes/")
	if !ok || !validID(node) {
		v.add("node", "must be nodes/{node}")
	}
	project, wl, ok := ParseWorkloadName(req.GetWorkload())
	if !ok {
		v.add("workload", "must be projects/{project}/workloads/{workload}")
	}
	if req.GetPodIndex() < 0 || req.GetPodIndex() >= MaxPods {
		v.add("pod_index", fmt.Sprintf("must be 0 to %d", MaxPods-1))
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	// The guard lets only this node's principal through (pkg/auth); this
	// is the same rule where the service runs behind no guard's rules.
	if caller, ok := auth.CallerFrom(ctx); ok && caller.Principal != auth.NodeAgentPrincipal(req.GetNode()) {
		return nil, apierr.PermissionDenied("credentials.resolve", req.GetWorkload())
	}
	bound, err := c.g.client.Get(ctx, etcdstore.PrefixBindings+node+"/"+project+"."+wl+"."+strconv.Itoa(int(req.GetPodIndex())))
	if err != nil {
		return nil, storeError(fmt.Errorf("read the binding: %w: %w", etcdstore.ErrUnavailable, err), apierr.Workload, req.GetWorkload())
	}
	if len(bound.Kvs) == 0 {
		return nil, apierr.PermissionDenied("credentials.resolve", req.GetWorkload())
	}
	w, err := c.store.get(ctx, project, wl)
	if err != nil {
		return nil, apiError(err, req.GetWorkload())
	}
	// Checked at submit, and again now: a project moved to another
	// department since loses the old department's credentials.
	p, err := c.g.projects.Project(ctx, projectsPrefix+project)
	if err != nil {
		return nil, err
	}
	return c.resolvePod(ctx, w.GetSpec(), []string{"", p.GetDepartment(), p.GetName()})
}

// resolvePod opens the credentials a spec names, each of one of the
// usable scopes, and lays them out as variables and files.
func (c *Credentials) resolvePod(ctx context.Context, spec *workloadv1.WorkloadSpec, usable []string) (*workloadv1.ResolvePodCredentialsResponse, error) {
	opened := map[string]map[string]string{}
	servers := map[string]string{} // a registry credential's server, by name
	values := func(name string) (map[string]string, error) {
		if vals, ok := opened[name]; ok {
			return vals, nil
		}
		scope, id, err := credentialAsset.parse(name, "credential")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(usable, scope) {
			return nil, apierr.PermissionDenied("credentials.use", name)
		}
		it, err := c.g.creds.Get(ctx, storeKey(scope, id))
		if err != nil {
			return nil, storeError(err, apierr.Credential, name)
		}
		vals, err := c.open(it.Msg)
		if err != nil {
			return nil, err
		}
		opened[name], servers[name] = vals, it.Msg.GetCredential().GetServer()
		return vals, nil
	}
	out := &workloadv1.ResolvePodCredentialsResponse{}
	for _, m := range spec.GetCredentials() {
		vals, err := values(m.GetCredential())
		if err != nil {
			return nil, err
		}
		for _, k := range sortedKeys(vals) {
			if m.GetPath() == "" {
				out.Env = append(out.Env, &workloadv1.EnvVar{Name: k, Value: vals[k]})
			} else {
				out.Files = append(out.Files, &workloadv1.CredentialFile{Path: path.Join(m.GetPath(), k), Content: []byte(vals[k])})
			}
		}
	}
	for _, e := range spec.GetEnv() {
		ref := e.GetCredential()
		if ref == nil {
			continue
		}
		vals, err := values(ref.GetCredential())
		if err != nil {
			return nil, err
		}
		val, ok := vals[ref.GetKey()]
		if !ok {
			return nil, apierr.NotFound(apierr.Credential, ref.GetCredential()+"/"+ref.GetKey())
		}
		out.Env = append(out.Env, &workloadv1.EnvVar{Name: e.GetName(), Value: val})
	}
	if ref := spec.GetRegistryCredential(); ref != "" {
		vals, err := values(ref)
		if err != nil {
			return nil, err
		}
		out.Registry = &workloadv1.RegistryAuth{Server: servers[ref], Username: vals["username"], Password: vals["password"]}
	}
	for i, m := range spec.GetDataSources() {
		ref := m.GetSource().GetGit().GetCredential() + m.GetSource().GetS3().GetCredential() // one of them at most
		if ref == "" {
			continue
		}
		vals, err := values(ref)
		if err != nil {
			return nil, err
		}
		if m.GetSource().GetS3() != nil {
			out.S3Keys = append(out.S3Keys, &workloadv1.S3Keys{DataSourceIndex: int32(i), AccessKeyId: vals["access_key_id"], SecretAccessKey: vals["secret_access_key"]})
			continue
		}
		out.GitTokens = append(out.GitTokens, &workloadv1.GitToken{DataSourceIndex: int32(i), Username: vals["username"], Token: vals["token"]})
	}
	return out, nil
}

// resolveRefs replaces the credential references of a spec submitted to
// project p by full names, after checking that each is one p may use (of
// the account, p's department or p), that it holds the key named, and that
// a credential given whole is generic. Syntax errors are validateSpec's.
func (c *Credentials) resolveRefs(ctx context.Context, p *quotav1.Project, spec *workloadv1.WorkloadSpec) error {
	found := map[string]*workloadv1.Credential{}
	lookup := func(ref, field string) (*workloadv1.Credential, error) {
		if ref == "" {
			return nil, nil // reported by validateSpec
		}
		if cr, ok := found[ref]; ok {
			return cr, nil
		}
		it, err := credentialAsset.resolve(ctx, c.g, p, ref, field)
		if err != nil {
			return nil, err
		}
		found[ref] = it.GetCredential()
		return it.GetCredential(), nil
	}
	var v violations
	for i, e := range spec.GetEnv() {
		ref := e.GetCredential()
		if ref == nil {
			continue
		}
		field := fmt.Sprintf("workload.spec.env[%d].credential", i)
		cr, err := lookup(ref.GetCredential(), field+".credential")
		if err != nil {
			return err
		}
		if cr == nil {
			continue
		}
		if ref.GetKey() != "" && !slices.Contains(cr.GetKeys(), ref.GetKey()) {
			v.add(field+".key", fmt.Sprintf("must be one of the keys of %s: %s", cr.GetName(), strings.Join(cr.GetKeys(), ", ")))
		}
		ref.Credential = cr.GetName()
	}
	for i, m := range spec.GetCredentials() {
		field := fmt.Sprintf("workload.spec.credentials[%d].credential", i)
		cr, err := lookup(m.GetCredential(), field)
		if err != nil {
			return err
		}
		if cr == nil {
			continue
		}
		if cr.GetType() != workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC {
			v.add(field, fmt.Sprintf("must be a generic credential; %s is %s (name one of its keys with an environment variable instead)",
				cr.GetName(), credentialTypeName(cr.GetType())))
		}
		m.Credential = cr.GetName()
	}
	if ref := spec.GetRegistryCredential(); ref != "" {
		cr, err := lookup(ref, "workload.spec.registry_credential")
		if err != nil {
			return err
		}
		switch want := clusterproto.ImageRegistry(spec.GetImage()); {
		case cr.GetType() != workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY:
			v.add("workload.spec.registry_credential", fmt.Sprintf("must be a registry credential; %s is %s",
				cr.GetName(), credentialTypeName(cr.GetType())))
		case clusterproto.RegistryHost(cr.GetServer()) != want:
			// Its password goes to the image's registry: never to another.
			v.add("workload.spec.registry_credential", fmt.Sprintf("must be a credential of the image's registry %s; %s is for %s",
				want, cr.GetName(), cr.GetServer()))
		}
		spec.RegistryCredential = cr.GetName()
	}
	return v.err()
}
